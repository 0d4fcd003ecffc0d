/**
 * Context windows discovered at runner start: a model the catalogue does not
 * know and whose window is not configured gets it from its server (an
 * OpenAI-compatible `/models`, Ollama's `/api/show`) before the runner takes
 * runs; a server that names none stops the start with one clear error; a
 * configured window is used without asking. Fake servers are node:http in
 * this process; each test starts a real runner and reads the window its runs get.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { runnerFeatures } from '../../app/features/index.js';
import { startRunner } from '../../runner/main.js';
import type { ModelSettings, RunnerPlugin } from '../../runner/plugin.js';
import { ConfigError } from '../../src/errors.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID, RunnerHarness as Harness } from './harness.js';

/** One request a fake model server received. */
interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

/** A fake model server: `answer` gives status and JSON body per request (404 when it returns undefined). */
async function modelServer(answer: (req: Seen) => { status?: number; json: unknown } | undefined) {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const r: Seen = { method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body: text ? JSON.parse(text) : undefined };
      seen.push(r);
      const a = answer(r);
      res.writeHead(a?.status ?? (a ? 200 : 404), { 'content-type': 'application/json' });
      res.end(JSON.stringify(a?.json ?? { error: 'not found' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** The validated configuration of `json` (a config file), as `steerbot start` reads it. */
function configOf(json: unknown) {
  const file = join(mkdtempSync(join(tmpdir(), 'steerbot-window-')), 'steerbot.json');
  writeFileSync(file, JSON.stringify(json));
  return readConfig({ file, env: {} });
}

/** A runner plugin that answers nothing and records each run's model settings. */
function recordingPlugin(models: ModelSettings[]): RunnerPlugin {
  return {
    manifest: { name: 'window-probe', version: '1.0.0', capabilities: { steering: true } },
    async run(ctx) {
      models.push(ctx.agent.model);
      return { outcome: 'completed' };
    },
  };
}

describe('context window discovery at runner start', () => {
  let h: Harness | undefined;
  const servers: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await h?.close();
    h = undefined;
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  /** Starts a runner on `config`'s model and profiles; the model settings of each run land in `models`. */
  async function start(json: { model: unknown; profiles?: unknown; bindings?: unknown; models?: unknown }, models: ModelSettings[] = []) {
    h ??= await Harness.start();
    const loaded = configOf({ runner: { plugin: 'local-agent' }, ...json });
    const config = { ...h.ctx.config, model: loaded.model, profiles: loaded.profiles, bindings: loaded.bindings, models: loaded.models };
    const harness = h;
    const runner = await startRunner(
      { ...h.ctx, config },
      {
        plugin: recordingPlugin(models),
        resolveOutbound: (cid) => (cid.startsWith('telegram:') ? harness.outbound : undefined),
        lockDurationMs: 2000,
        stalledIntervalMs: 500,
        features: runnerFeatures(),
      },
    );
    h.runners.push(runner);
    return models;
  }

  /** The model settings of one run in `conversationId`. */
  async function modelOfARun(models: ModelSettings[], conversationId = CID): Promise<ModelSettings> {
    const before = models.length;
    const { runId } = (await h!.ingest('hello', { conversationId })) as { runId: string };
    await h!.runEnded(runId, 10_000, conversationId);
    expect(models).toHaveLength(before + 1);
    return models[before]!;
  }

  describe('an OpenAI-compatible server', () => {
    it("reads `context_length` from its /models entry of the model, asking once with the model's key", async () => {
      const fake = await modelServer((r) =>
        r.path === '/v1/models'
          ? {
              json: {
                object: 'list',
                data: [
                  { id: 'other/model', context_length: 4096 },
                  { id: 'acme/chat-large', context_length: 65_536 },
                ],
              },
            }
          : undefined,
      );
      servers.push(fake);
      const models = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'acme/chat-large', apiKey: 'sk-test' } });
      expect(await modelOfARun(models)).toMatchObject({ name: 'acme/chat-large', contextWindow: 65_536, outputReserve: 4096 });
      expect(fake.seen).toEqual([{ method: 'GET', path: '/v1/models', authorization: 'Bearer sk-test', body: undefined }]);
    });

    it("reads vLLM's `max_model_len`, for the model, its fallback and a profile's model, one request per model", async () => {
      const fake = await modelServer((r) =>
        r.path === '/v1/models'
          ? {
              json: {
                data: [
                  { id: 'qwen-32b', max_model_len: 32_768 },
                  { id: 'qwen-72b', max_model_len: 131_072 },
                ],
              },
            }
          : undefined,
      );
      servers.push(fake);
      const baseURL = `${fake.url}/v1`;
      const models = await start({
        model: { provider: 'openai-compatible', baseURL, name: 'qwen-32b', fallbacks: [{ name: 'qwen-72b' }] },
        profiles: { big: { model: { name: 'qwen-72b' } } },
        bindings: [{ profile: 'big', chat: 'telegram:7' }],
      });
      const base = await modelOfARun(models);
      expect(base).toMatchObject({ name: 'qwen-32b', contextWindow: 32_768 });
      expect(base.fallbacks).toEqual([expect.objectContaining({ name: 'qwen-72b', contextWindow: 131_072 })]);
      expect(await modelOfARun(models, 'telegram:7')).toMatchObject({ name: 'qwen-72b', contextWindow: 131_072 });
      // qwen-72b is a fallback and a profile's model: one request for it; qwen-32b: one.
      expect(fake.seen.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models', 'GET /v1/models']);
    });

    it('for a model a conversation may switch to with /model, which a run that chose it gets', async () => {
      const fake = await modelServer((r) =>
        r.path === '/v1/models'
          ? {
              json: {
                data: [
                  { id: 'small', max_model_len: 8192 },
                  { id: 'wide', max_model_len: 200_000 },
                ],
              },
            }
          : undefined,
      );
      servers.push(fake);
      const models = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'small' }, models: { wide: { name: 'wide' } } });
      expect(await modelOfARun(models)).toMatchObject({ name: 'small', contextWindow: 8192 });
      await h!.ctx.redis.hset(conversationKeys(h!.prefix, CID).meta, 'model', 'wide');
      expect(await modelOfARun(models)).toMatchObject({ name: 'wide', contextWindow: 200_000 });
    });

    it('refuses to start when a discovered fallback has a smaller window than the model', async () => {
      const fake = await modelServer(() => ({
        json: {
          data: [
            { id: 'wide', context_window: 65_536 },
            { id: 'narrow', context_window: 8192 },
          ],
        },
      }));
      servers.push(fake);
      const err = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'wide', fallbacks: [{ name: 'narrow' }] } }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues).toEqual([
        { path: 'model.fallbacks.0.contextWindow', message: expect.stringMatching(/at least the context window of model \(65536\).*"narrow" has 8192/) },
      ]);
    });
  });

  it('refuses to start when the configured reserve leaves no room in the discovered window', async () => {
    const fake = await modelServer(() => ({ json: { data: [{ id: 'tiny', max_context_length: 4096 }] } }));
    servers.push(fake);
    const err = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'tiny', outputReserve: 8192 } }).catch(
      (e: unknown) => e,
    );
    expect((err as ConfigError).issues).toEqual([{ path: 'model.outputReserve', message: 'must be less than the discovered context window of "tiny" (4096)' }]);
  });

  describe('an Ollama server', () => {
    it("reads the architecture's context_length from /api/show when /v1/models names no length", async () => {
      const fake = await modelServer((r) => {
        if (r.path === '/v1/models') return { json: { object: 'list', data: [{ id: 'llama3.1:8b', object: 'model', owned_by: 'library' }] } };
        if (r.path === '/api/show' && (r.body as { model?: string }).model === 'llama3.1:8b') {
          return { json: { parameters: 'stop "<|eot_id|>"', model_info: { 'general.architecture': 'llama', 'llama.context_length': 131_072 } } };
        }
        return undefined;
      });
      servers.push(fake);
      const models = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'llama3.1:8b' } });
      expect(await modelOfARun(models)).toMatchObject({ contextWindow: 131_072, outputReserve: 4096 });
      expect(fake.seen.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models', 'POST /api/show']);
    });

    it('prefers the num_ctx the model is served with', async () => {
      const fake = await modelServer((r) =>
        r.path === '/api/show'
          ? {
              json: {
                parameters: 'num_ctx                        8192\nstop "<|eot_id|>"',
                model_info: { 'general.architecture': 'llama', 'llama.context_length': 131_072 },
              },
            }
          : { json: { data: [] } },
      );
      servers.push(fake);
      const models = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'llama3.1:8b' } });
      expect(await modelOfARun(models)).toMatchObject({ contextWindow: 8192 });
    });
  });

  it('fails to start with one error naming the model, what was asked and the setting, when no server names a window', async () => {
    const fake = await modelServer((r) => (r.path === '/v1/models' ? { json: { data: [{ id: 'mystery-7b' }] } } : undefined));
    servers.push(fake);
    const err = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'mystery-7b', apiKey: 'sk-secret' } }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    const issues = (err as ConfigError).issues;
    expect(issues).toHaveLength(1);
    expect(issues[0]!.path).toBe('model.contextWindow');
    expect(issues[0]!.message).toBe(
      `unknown model "mystery-7b": its context window could not be discovered (GET ${fake.url}/v1/models: no context length for "mystery-7b"; ` +
        `POST ${fake.url}/api/show: HTTP 404): set it in tokens (STEERBOT_MODEL_CONTEXT_WINDOW or model.contextWindow)`,
    );
    expect((err as Error).message).not.toContain('sk-secret');
    // Nothing was started: no worker takes the run of a message.
    expect(h!.runners).toHaveLength(0);
  });

  it('names an unreachable server the same way', async () => {
    const gone = await modelServer(() => undefined);
    await gone.close();
    const err = await start({ model: { provider: 'openai-compatible', baseURL: `${gone.url}/v1`, name: 'mystery-7b' } }).catch((e: unknown) => e);
    expect((err as ConfigError).issues[0]!.message).toMatch(/GET .*\/v1\/models: ECONNREFUSED; POST .*\/api\/show: ECONNREFUSED/);
  });

  it('names a server whose URL holds credentials without the password', async () => {
    const fake = await modelServer(() => ({ json: { data: [] } }));
    servers.push(fake);
    const baseURL = `${fake.url.replace('http://', 'http://user:pw-secret-4711@')}/v1`;
    const err = await start({ model: { provider: 'openai-compatible', baseURL, name: 'mystery-7b' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues[0]!.message).toMatch(/GET .*\/v1\/models: /);
    expect(JSON.stringify((err as ConfigError).issues)).not.toContain('pw-secret-4711');
  });

  it('uses a configured window without asking the server', async () => {
    const fake = await modelServer(() => ({ json: { data: [{ id: 'llama3.1:8b', context_length: 131_072 }] } }));
    servers.push(fake);
    const models = await start({ model: { provider: 'openai-compatible', baseURL: `${fake.url}/v1`, name: 'llama3.1:8b', contextWindow: 16_384 } });
    expect(await modelOfARun(models)).toMatchObject({ contextWindow: 16_384, outputReserve: 4096 });
    expect(fake.seen).toEqual([]);
  });
});
