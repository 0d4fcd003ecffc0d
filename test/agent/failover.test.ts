/**
 * Models that fail over, end to end through the real OpenAI-compatible
 * provider against two fake servers: a rate limit, a 5xx or a silent stream
 * on the model asks the same step of the fallback (one run, one answer, one
 * recorded step); a request refused as invalid fails over to nothing; the
 * settings' `model.fallbacks` are built by the runner's model factory; a
 * fallback that cannot serve is refused at load, naming its field.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { isTransient } from '../../plugins/local-agent/recovery.js';
import { ConfigError } from '../../src/errors.js';
import { secretValues } from '../../src/logger.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { askAndSettle, fakeModel, onStreamingChannel, perTestModel, RunnerHarness, statusReply } from '../runner/harness.js';

const t = perTestModel();
let fallback: FakeOpenAIServer;

beforeEach(async () => {
  fallback = await startFakeOpenAI();
  fallback.script(() => ({ text: 'Answered by the fallback.' }));
});
afterEach(async () => {
  await fallback.close();
});

/** The local agent on this test's fake, failing over to `fallback`, with no provider retries and a short idle timeout; `streaming`: on a channel that streams. */
async function start(streaming = false): Promise<RunnerHarness> {
  const plugin = createLocalAgentPlugin({
    model: fakeModel(t.fake.url),
    fallbackModels: [fakeModel(fallback.url)],
    builtins: { currentTime: false },
    maxRetries: 0,
    streamIdleTimeoutMs: 300,
    streaming,
  });
  // A streaming agent runs on a channel that streams (the harness's own does not).
  t.h = await RunnerHarness.start({ plugin: streaming ? onStreamingChannel(plugin) : plugin, followUpsOnFailure: 0 });
  return t.h;
}

describe('a model call that fails over', () => {
  for (const [what, status] of [
    ['a rate limit (429)', 429],
    ['an overload (529)', 529],
    ['a server error (500)', 500],
  ] as const) {
    it(`after ${what} asks the same step of the fallback: one run, one answer`, async () => {
      t.fake.script(() => ({ error: { status, message: 'try later', type: 'server_error' } }));
      const h = await start();

      expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'completed' });
      expect(t.fake.requests).toHaveLength(1);
      expect(fallback.requests).toHaveLength(1);
      // The same step: the fallback got the very prompt the model was sent.
      expect(fallback.requests[0]!.body.messages).toEqual(t.fake.requests[0]!.body.messages);
      expect(h.outbound.texts).toEqual(['Answered by the fallback.']);
      // The step names the model that answered it, and `/status` says it was a fallback.
      expect((await h.entries('model.step')).map((e) => [e.model, e.fallback])).toEqual([['m', true]]);
      expect(await statusReply(h)).toContain("Last step answered by m, a fallback (the run's model failed).");
    });
  }

  it('a step the run’s own model answered names it, and /status has no fallback line', async () => {
    t.fake.script([{ text: 'Fine.' }]);
    const h = await start();
    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'completed' });
    expect((await h.entries('model.step')).map((e) => [e.model, e.fallback])).toEqual([['m', undefined]]);
    expect(await statusReply(h)).not.toContain('fallback');
  });

  it('after a silent stream, without asking the silent model again; what it streamed is not streamed twice', async () => {
    t.fake.script([{ text: 'half an answer that', stallAfterChunks: 3 }]);
    const h = await start(true);

    expect(await askAndSettle(h, 'explain')).toMatchObject({ outcome: 'completed' });
    expect(t.fake.requests.map((r) => r.aborted === true)).toEqual([true]);
    expect(fallback.requests).toHaveLength(1);
    expect(h.outbound.texts).toEqual(['Answered by the fallback.']);
  });

  it('keeps the fallback for the later steps of the invocation', async () => {
    t.fake.script(() => ({ error: { status: 429, message: 'slow down', type: 'rate_limit_error' } }));
    fallback.script([{ toolCalls: [{ name: 'current_time', args: {} }] }, { text: 'It is now.' }]);
    const plugin = createLocalAgentPlugin({ model: fakeModel(t.fake.url), fallbackModels: [fakeModel(fallback.url)], maxRetries: 0 });
    t.h = await RunnerHarness.start({ plugin, followUpsOnFailure: 0 });

    expect(await askAndSettle(t.h, 'what time is it?')).toMatchObject({ outcome: 'completed' });
    expect(t.fake.requests).toHaveLength(1);
    expect(fallback.requests).toHaveLength(2);
    expect(t.h.outbound.texts).toEqual(['It is now.']);
  });

  it('not after a request refused as invalid (400): any model would refuse it', async () => {
    t.fake.script(() => ({ error: { status: 400, message: 'bad request', type: 'invalid_request_error' } }));
    const h = await start();

    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'failed', reason: 'model API error 400' });
    expect(fallback.requests).toHaveLength(0);
  });

  it('fails the run when the fallbacks fail too, each asked once', async () => {
    t.fake.script(() => ({ error: { status: 503, message: 'down', type: 'server_error' } }));
    fallback.script(() => ({ error: { status: 503, message: 'down too', type: 'server_error' } }));
    const h = await start();

    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'failed', reason: 'model API error 503' });
    expect([t.fake.requests.length, fallback.requests.length]).toEqual([1, 1]);
  });
});

describe('model.fallbacks in the settings', () => {
  it('are built by the runner and asked after the model fails', async () => {
    t.fake.script(() => ({ error: { status: 429, message: 'slow down', type: 'rate_limit_error' } }));
    const h = await RunnerHarness.start({ followUpsOnFailure: 0 });
    t.h = h;
    const m = h.ctx.config.model;
    h.ctx.config.model = {
      ...m,
      provider: 'openai-compatible',
      baseURL: t.fake.url,
      fallbacks: [{ provider: 'openai-compatible', name: 'backup', baseURL: fallback.url, contextWindow: m.contextWindow, outputReserve: m.outputReserve }],
    };
    await h.startRunner(createLocalAgentPlugin({ builtins: { currentTime: false }, maxRetries: 0 }));

    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'completed' });
    expect(fallback.requests.map((r) => r.body.model)).toEqual(['backup']);
    expect(h.outbound.texts).toEqual(['Answered by the fallback.']);
  });

  it('are resolved against the model: the same provider inherits its endpoint and key, another needs its own', () => {
    const config = readConfigWith({
      model: {
        name: 'gpt-4o-mini',
        baseURL: 'http://proxy.test/v1',
        fallbacks: [{ name: 'gpt-4o' }, { provider: 'anthropic', name: 'claude-sonnet-4-5', apiKey: 'sk-ant' }],
      },
    });
    expect(config.model.fallbacks).toEqual([
      { provider: 'openai', name: 'gpt-4o', baseURL: 'http://proxy.test/v1', apiKey: 'sk-base', contextWindow: 128_000, outputReserve: 16_384 },
      { provider: 'anthropic', name: 'claude-sonnet-4-5', apiKey: 'sk-ant', contextWindow: 200_000, outputReserve: 64_000 },
    ]);
    expect(readConfigWith({ model: { name: 'gpt-4o-mini' } }).model.fallbacks).toBeUndefined();
    // A fallback's key is a secret like the model's: no log line carries it.
    expect(secretValues(config)).toContain('sk-ant');
  });

  it('refuses a fallback with a smaller window, an unknown one without a window, or another provider without a key', () => {
    for (const [fallbacks, path] of [
      [[{ name: 'gpt-4o', contextWindow: 8192 }], 'model.fallbacks.0.contextWindow'],
      [[{ name: 'my-local-model' }], 'model.fallbacks.0.contextWindow'],
      [[{ provider: 'anthropic', name: 'claude-sonnet-4-5' }], 'model.fallbacks.0.apiKey'],
      [[{ provider: 'openai-compatible', name: 'llama', contextWindow: 200_000 }], 'model.fallbacks.0.baseURL'],
    ] as const) {
      expect(configIssues(() => readConfigWith({ model: { name: 'gpt-4o-mini', fallbacks } }))).toContain(path);
    }
  });
});

const dir = mkdtempSync(join(tmpdir(), 'steerbot-failover-'));

/** The configuration of a config file holding `json`, with the base model's key in the environment. */
function readConfigWith(json: unknown) {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(json));
  return readConfig({ file, env: { OPENAI_API_KEY: 'sk-base' } });
}

/** The paths of the ConfigError `read` throws. */
function configIssues(read: () => unknown): string[] {
  try {
    read();
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => i.path);
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('what fails over', () => {
  it('is a retryable provider error or a network failure, not an invalid request', () => {
    const net = Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } });
    expect(isTransient(net)).toBe(true);
    expect(isTransient(new Error('some bug'))).toBe(false);
  });
});
