/**
 * steerbot as a platform: plugins selected by name or module, validated by
 * their own schemas, the runner's capabilities read from its manifest, the
 * model providers, and the private Redis kept to all-in-one processes.
 */
import { generateText } from 'ai';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, readConfig } from '../app/config.js';
import { type RunningApp, startApp } from '../app/start.js';
import type { HostParts } from '../host/main.js';
import { createModel } from '../runner/model.js';
import { ConfigError, type ConfigIssue } from '../src/errors.js';
import { createLogger } from '../src/logger.js';
import { freePort } from '../src/redis/local.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { waitFor } from '../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from './helpers/redis.js';

const ECHO = './test/fixtures/plugins/echo-agent.ts';
const MEMO = './test/fixtures/plugins/memo-channel.ts';
const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

async function issuesOf(p: Promise<unknown>): Promise<ConfigIssue[]> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).issues;
}

describe('plugins from modules', () => {
  it('selects a runner plugin by module path, with its settings under agents.<id> validated by its schema and its variables', async () => {
    const config = await loadConfig({ env: { STEERBOT_RUNNER_PLUGIN: ECHO, ECHO_PREFIX: 'you said:' } });
    expect(config.runner.plugin).toBe(ECHO);
    expect(config.agents['echo-agent']).toEqual({ prefix: 'you said:' });
  });

  it('names the field and the variable a bad plugin setting came from', async () => {
    const issues = await issuesOf(loadConfig({ env: { STEERBOT_RUNNER_PLUGIN: ECHO, ECHO_PREFIX: 'x'.repeat(30) } }));
    expect(issues).toEqual([{ path: 'agents.echo-agent.prefix', message: expect.stringMatching(/at most 20 characters \(env ECHO_PREFIX="x{30}"\)/) }]);
  });

  it('refuses an unknown runner id, and a module that cannot be loaded, naming where each was set', async () => {
    const unknown = await issuesOf(loadConfig({ env: { STEERBOT_RUNNER_PLUGIN: 'no-such-agent' } }));
    expect(unknown).toEqual([{ path: 'runner.plugin', message: expect.stringContaining('unknown runner plugin no-such-agent') }]);
    const missing = await issuesOf(loadConfig({ env: { STEERBOT_PLUGINS: './test/fixtures/plugins/nope.ts' } }));
    expect(missing).toEqual([{ path: 'plugins.0', message: expect.stringContaining('cannot load plugin module ./test/fixtures/plugins/nope.ts') }]);
    const notAPlugin = await issuesOf(loadConfig({ env: { STEERBOT_PLUGINS: './testing/wait.ts' } }));
    expect(notAPlugin[0]?.message).toContain('exports no plugin definition');
  });

  it('validates an extra channel module under channels.<id> with its own schema (unknown keys are errors)', async () => {
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'steerbot-platform-')), 'config.json');
    writeFileSync(file, JSON.stringify({ plugins: [MEMO], channels: { memo: { greting: 'typo' } } }));
    const issues = await issuesOf(loadConfig({ file, env: {} }));
    expect(issues).toEqual([{ path: 'channels.memo.greting', message: expect.stringContaining('unknown setting') }]);
    // Without the module, `memo` is not a channel at all.
    expect(() => readConfig({ file, env: {} })).toThrow(/channels\.memo/);
  });
});

describe('an app with plugins from modules', () => {
  let app: RunningApp | undefined;
  const prefix = testPrefix();
  afterEach(async () => {
    await app?.stop();
    app = undefined;
    const redis = new Redis(redisUrl());
    await cleanupPrefix(redis, prefix);
    redis.disconnect();
  });

  it('answers through an extra channel with a runner plugin from a module, end to end', async () => {
    const config = await loadConfig({
      env: {
        REDIS_URL: redisUrl(),
        STEERBOT_PREFIX: prefix,
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        STEERBOT_PLUGINS: MEMO,
        STEERBOT_RUNNER_PLUGIN: ECHO,
      },
    });
    app = await startApp({ config: { ...config, channels: { ...config.channels, memo: { greeting: 'hi' } } }, logger });
    expect(app.channels).toEqual(['web', 'memo']); // the web chat is on by default
    const chat = `c${prefix}`;
    const post = await fetch(`${app.address}/memo/${chat}`, { method: 'POST', body: JSON.stringify({ id: `${prefix}-1`, text: 'ping' }) });
    expect(post.status).toBe(202);
    expect(await post.json()).toEqual({ result: 'ingested', greeting: 'hi' });
    const replies = async () => ((await (await fetch(`${app!.address}/memo/${chat}`)).json()) as { replies: string[] }).replies;
    await waitFor(async () => (await replies()).length > 0, 10_000);
    expect(await replies()).toEqual(['echo: ping']);
    // A duplicate delivery of the same update makes no second reply.
    await fetch(`${app.address}/memo/${chat}`, { method: 'POST', body: JSON.stringify({ id: `${prefix}-1`, text: 'ping' }) });
    expect(await replies()).toEqual(['echo: ping']);
  });

  it("gives the host the runner plugin's steering capability from its manifest", async () => {
    const seen: boolean[] = [];
    const hooks = {
      startHost: async (_ctx: unknown, parts: HostParts) => {
        seen.push(parts.steeringCapable);
        return { stop: async () => {} };
      },
      startRunner: async () => ({ stop: async () => {} }),
    };
    const base = { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, HOST: '127.0.0.1', PORT: String(await freePort()) };
    for (const env of [{ ...base, STEERBOT_RUNNER_PLUGIN: ECHO }, base]) {
      const started = await startApp({ config: await loadConfig({ env }), logger, hooks });
      await started.stop();
    }
    expect(seen).toEqual([false, true]);
  });
});

describe('the private Redis', () => {
  for (const [name, env] of [
    ['a host-only process', { STEERBOT_RUNNER: 'false' }],
    ['a runner-only process', { STEERBOT_HOST: 'false' }],
  ] as const) {
    it(`is refused to ${name} without REDIS_URL, naming the variable`, async () => {
      const config = readConfig({ env });
      const issues = await issuesOf(startApp({ config, logger }));
      expect(issues).toEqual([{ path: 'redis.url', message: expect.stringContaining('set REDIS_URL') }]);
    });
  }

  it('is refused with NODE_ENV=production', async () => {
    const saved = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      const issues = await issuesOf(startApp({ config: readConfig({ env: {} }), logger }));
      expect(issues[0]?.message).toContain('NODE_ENV=production');
    } finally {
      process.env.NODE_ENV = saved;
    }
  });
});

describe('model providers', () => {
  it('uses OpenAI with OPENAI_API_KEY alone', () => {
    const config = readConfig({ env: { OPENAI_API_KEY: 'sk-test-only' } });
    expect(config.model).toMatchObject({ provider: 'openai', apiKey: 'sk-test-only' });
    expect(config.model.baseURL).toBeUndefined();
    expect((createModel(config.model) as { provider: string }).provider).toMatch(/^openai/);
  });

  it("reads each provider's own key variable, and only for that provider", () => {
    expect(readConfig({ env: { ANTHROPIC_API_KEY: 'a-key' } }).model.apiKey).toBeUndefined();
    const anthropic = readConfig({ env: { STEERBOT_MODEL_PROVIDER: 'anthropic', ANTHROPIC_API_KEY: 'a-key', OPENAI_API_KEY: 'o-key' } }).model;
    expect(anthropic.apiKey).toBe('a-key');
    expect((createModel(anthropic) as { provider: string }).provider).toMatch(/^anthropic/);
    const google = readConfig({ env: { STEERBOT_MODEL_PROVIDER: 'google', GOOGLE_GENERATIVE_AI_API_KEY: 'g-key' } }).model;
    expect(google.apiKey).toBe('g-key');
    expect((createModel(google) as { provider: string }).provider).toMatch(/^google/);
  });

  it('names what is missing: the key variable, or the base URL of an OpenAI-compatible server', () => {
    expect(() => createModel(readConfig({ env: {} }).model)).toThrow(/model\.apiKey: .*set OPENAI_API_KEY/);
    expect(() => createModel(readConfig({ env: { STEERBOT_MODEL_PROVIDER: 'openai-compatible' } }).model)).toThrow(/model\.baseURL: .*OPENAI_BASE_URL/);
  });

  for (const provider of ['openai', 'openai-compatible'] as const) {
    it(`${provider}: talks to the configured base URL through the real provider`, async () => {
      const fake = await startFakeOpenAI();
      try {
        fake.script([{ text: `hello from ${provider}` }]);
        const model = createModel(readConfig({ env: { STEERBOT_MODEL_PROVIDER: provider, OPENAI_BASE_URL: fake.url, OPENAI_API_KEY: 'sk-fake' } }).model);
        const { text } = await generateText({ model, prompt: 'hi' });
        expect(text).toBe(`hello from ${provider}`);
        expect(fake.requests[0]?.headers.authorization).toBe('Bearer sk-fake');
      } finally {
        await fake.close();
      }
    });
  }
});
