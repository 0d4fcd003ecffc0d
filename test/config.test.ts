import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILTIN_REGISTRY, buildConfigSchema, DEFAULT_CONFIG, readConfig } from '../app/config.js';
import { channelIds, redactConfig } from '../app/summary.js';
import { ConfigError, type ConfigIssue } from '../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'steerbot-config-'));
let n = 0;
function writeConfig(content: unknown): string {
  const file = join(dir, `config-${n++}.json`);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

function issuesOf(fn: () => unknown): ConfigIssue[] {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('loads every default from an empty environment', () => {
    const config = readConfig({ env: {} });
    expect(config).toEqual(DEFAULT_CONFIG);
    expect(config.redis).toEqual({ mode: 'single', sentinels: [], clusterNodes: [], prefix: 'sb' });
    expect(config.http).toEqual({ host: '0.0.0.0', port: 8080, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 });
    expect(config.dispatch).toEqual({
      defaultPolicy: 'steer',
      steeringCap: 20,
      dedupeTtlSeconds: 86_400,
      maxMessageChars: 16_000,
      afterPurge: 'refuse',
      rateLimit: {},
    });
    expect(config.retention).toEqual({
      endedRunTtlSeconds: 86_400,
      recordTrimAfterEntries: 0,
      recordTrimAfterDays: 0,
      idleTtlSeconds: 0,
      tombstoneTtlSeconds: 604_800,
      indexMaxEntries: 10,
    });
    expect(config.runs).toEqual({ leaseMs: 30_000, heartbeatMs: 10_000, reconcileIntervalMs: 60_000, queueName: 'steerbot-runs', followUpsOnFailure: 2 });
    expect(config.runner).toEqual({ enabled: true, plugin: 'local-agent', concurrency: 4, shutdownGraceMs: 10_000, outboxTtlSeconds: 86_400 });
    expect(config.agents['local-agent']).toEqual({
      streaming: true,
      httpFetch: false,
      currentTime: true,
      askUser: false,
      steeringMode: 'all',
      maxSteps: 24,
      toolModules: [],
      skills: [],
      notesFiles: [],
      notesFileMaxChars: 8000,
      notesBudgetChars: 16_000,
      personas: {},
      streamIdleTimeoutMs: 120_000,
      attachments: { accept: ['image/*'], maxBytes: 10_485_760, policy: 'text', maxAudioSeconds: 600 },
    });
    expect(config.host.enabled).toBe(true);
    expect(config.log.level).toBe('info');
    expect(config.model).toEqual({ provider: 'openai', name: 'gpt-4o-mini', contextWindow: 128_000, outputReserve: 16_384 }); // from the model catalogue
    // The web chat is the one channel on without configuration.
    expect(Object.keys(config.channels)).toEqual(['web']);
    expect(config.channels.web).toMatchObject({ enabled: true });
    expect(config.host.console).toEqual({ enabled: true, allowLoopback: false });
  });

  it('reads the file named by STEERBOT_CONFIG', () => {
    const file = writeConfig({ http: { port: 9001 }, channels: { telegram: { token: '123:abc' } } });
    const config = readConfig({ env: { STEERBOT_CONFIG: file } });
    expect(config.http.port).toBe(9001);
    expect(config.http.host).toBe('0.0.0.0');
    expect(config.channels.telegram).toMatchObject({ token: '123:abc', mode: 'polling' });
  });

  it('lets environment variables override the file', () => {
    const file = writeConfig({ http: { port: 9001, host: '127.0.0.1' }, runner: { enabled: true }, redis: { prefix: 'file' } });
    const config = readConfig({
      file,
      env: { PORT: '9002', STEERBOT_RUNNER: '0', STEERBOT_PREFIX: 'env', REDIS_SENTINELS: 'a:1, b:2' },
    });
    expect(config.http).toMatchObject({ port: 9002, host: '127.0.0.1' });
    expect(config.runner.enabled).toBe(false);
    expect(config.redis.prefix).toBe('env');
    expect(config.redis.sentinels).toEqual([
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
    ]);
  });

  it('parses booleans as true/false/1/0', () => {
    expect(readConfig({ env: { STEERBOT_HOST: 'false' } }).host.enabled).toBe(false);
    expect(readConfig({ env: { STEERBOT_HOST: '1' } }).host.enabled).toBe(true);
    expect(readConfig({ env: { STEERBOT_RUNNER: 'TRUE' } }).runner.enabled).toBe(true);
  });

  it('names every bad field with its path and env var', () => {
    const issues = issuesOf(() => readConfig({ env: { PORT: 'abc', STEERBOT_DEFAULT_POLICY: 'nope', STEERBOT_STEERING_CAP: '0' } }));
    const byPath = new Map(issues.map((i) => [i.path, i.message]));
    expect(byPath.get('http.port')).toMatch(/integer.*PORT="abc"/);
    expect(byPath.get('dispatch.defaultPolicy')).toMatch(/steer, followup, collect, interrupt, supersede.*STEERBOT_DEFAULT_POLICY="nope"/);
    expect(byPath.get('dispatch.steeringCap')).toMatch(/>= 1.*STEERBOT_STEERING_CAP/);
    expect(issues).toHaveLength(3);
  });

  it('puts every issue in the error message', () => {
    try {
      readConfig({ env: { PORT: 'abc', LOG_LEVEL: 'loud' } });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toContain('http.port');
      expect((err as Error).message).toContain('log.level');
    }
  });

  it('never echoes a secret env value', () => {
    const issues = issuesOf(() => readConfig({ env: { REDIS_URL: 'http://user:hunter2@example.com' } }));
    expect(issues).toEqual([{ path: 'redis.url', message: expect.stringContaining('env REDIS_URL') }]);
    expect(JSON.stringify(issues)).not.toContain('hunter2');
  });

  it('reads the agent section from the environment and names a bad steering mode or an empty prompt', () => {
    const agent = readConfig({
      env: { STEERBOT_SYSTEM_PROMPT: '  Be brief.  ', STEERBOT_AGENT_HTTP_FETCH: '1', STEERBOT_AGENT_STEERING_MODE: 'one', STEERBOT_AGENT_MAX_STEPS: '8' },
    }).agents['local-agent'];
    expect(agent).toEqual({
      systemPrompt: 'Be brief.',
      streaming: true,
      httpFetch: true,
      currentTime: true,
      askUser: false,
      steeringMode: 'one',
      maxSteps: 8,
      toolModules: [],
      skills: [],
      notesFiles: [],
      notesFileMaxChars: 8000,
      notesBudgetChars: 16_000,
      personas: {},
      streamIdleTimeoutMs: 120_000,
      attachments: { accept: ['image/*'], maxBytes: 10_485_760, policy: 'text', maxAudioSeconds: 600 },
    });
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_AGENT_STEERING_MODE: 'some', STEERBOT_AGENT_MAX_STEPS: '0' } }));
    expect(issues.map((i) => i.path).sort()).toEqual(['agents.local-agent.maxSteps', 'agents.local-agent.steeringMode']);
    expect(issues.find((i) => i.path === 'agents.local-agent.steeringMode')?.message).toMatch(/all or one.*STEERBOT_AGENT_STEERING_MODE/);
    // In a config file, a prompt of spaces is an error (in the environment, blank means unset).
    expect(
      buildConfigSchema(BUILTIN_REGISTRY)
        .safeParse({ agents: { 'local-agent': { systemPrompt: '   ' } } })
        .error?.issues.map((i) => i.path.join('.')),
    ).toEqual(['agents.local-agent.systemPrompt']);
  });

  it('reads the outbox TTL and refuses one under an hour', () => {
    expect(readConfig({ env: { STEERBOT_OUTBOX_TTL_SECONDS: '86400' } }).runner.outboxTtlSeconds).toBe(86_400);
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_OUTBOX_TTL_SECONDS: '60' } }));
    expect(issues).toEqual([{ path: 'runner.outboxTtlSeconds', message: expect.stringMatching(/>= 3600.*STEERBOT_OUTBOX_TTL_SECONDS/) }]);
  });

  it('refuses a Discord catch-up reaching further back than the dedupe keys last', () => {
    const env = { DISCORD_BOT_TOKEN: 'token-of-the-bot', STEERBOT_DEDUPE_TTL_SECONDS: '3600' };
    const issues = issuesOf(() => readConfig({ env }));
    expect(issues).toEqual([
      { path: 'channels.discord.catchUpMaxAgeSeconds', message: expect.stringMatching(/must not exceed dispatch.dedupeTtlSeconds \(3600\)/) },
    ]);
    expect(readConfig({ env: { ...env, STEERBOT_DEDUPE_TTL_SECONDS: '86400' } }).channels.discord?.catchUpMaxAgeSeconds).toBe(86_400);
  });

  it('rejects a heartbeat not below the lease, naming runs.heartbeatMs', () => {
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_LEASE_MS: '5000', STEERBOT_HEARTBEAT_MS: '5000' } }));
    expect(issues).toEqual([{ path: 'runs.heartbeatMs', message: expect.stringMatching(/less than runs.leaseMs.*STEERBOT_HEARTBEAT_MS/) }]);
  });

  it('reports cross-field and type errors of different sections together', () => {
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_LEASE_MS: '2000', PORT: '70000' } }));
    expect(issues.map((i) => i.path).sort()).toEqual(['http.port', 'runs.heartbeatMs']);
  });

  it('requires sentinels and a master name in sentinel mode', () => {
    const issues = issuesOf(() => readConfig({ env: { REDIS_MODE: 'sentinel' } }));
    expect(issues.map((i) => i.path).sort()).toEqual(['redis.sentinelName', 'redis.sentinels']);
  });

  it('rejects a malformed host:port naming the list item', () => {
    const issues = issuesOf(() => readConfig({ env: { REDIS_MODE: 'cluster', REDIS_CLUSTER_NODES: 'a:1,nope' } }));
    expect(issues).toEqual([{ path: 'redis.clusterNodes.1', message: expect.stringMatching(/host:port.*REDIS_CLUSTER_NODES/) }]);
  });

  it('rejects unknown keys in the file, naming them and the file', () => {
    const file = writeConfig({ http: { prot: 1 }, dispatchh: {} });
    const issues = issuesOf(() => readConfig({ file, env: {} }));
    expect(issues.map((i) => i.path).sort()).toEqual(['dispatchh', 'http.prot']);
    expect(issues[0]?.message).toContain(file);
  });

  it('names the file when a file value is wrong', () => {
    const file = writeConfig({ redis: { prefix: 'has space' } });
    expect(issuesOf(() => readConfig({ file, env: {} }))).toEqual([{ path: 'redis.prefix', message: expect.stringContaining(`in ${file}`) }]);
  });

  it('names an unreadable config file', () => {
    const file = join(dir, 'missing.json');
    expect(issuesOf(() => readConfig({ file, env: {} }))).toEqual([{ path: `config file ${file}`, message: expect.stringContaining('ENOENT') }]);
  });

  it('names a config file that is not valid JSON, and still reports env issues', () => {
    const file = writeConfig('{ "http": ');
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_CONFIG: file, PORT: 'x' } }));
    expect(issues).toEqual([
      { path: `config file ${file}`, message: expect.stringContaining('not valid JSON') },
      { path: 'http.port', message: expect.stringContaining('PORT') },
    ]);
  });

  it("reads model.apiKey from each provider's standard variable, and only for that provider", () => {
    // Written out, not read from MODEL_PROVIDER_KEY_ENV, so that a provider losing its variable fails here.
    const standard = {
      openai: 'OPENAI_API_KEY',
      anthropic: 'ANTHROPIC_API_KEY',
      google: 'GOOGLE_GENERATIVE_AI_API_KEY',
      'openai-compatible': 'OPENAI_API_KEY',
    } as const;
    for (const [provider, variable] of Object.entries(standard)) {
      const model = readConfig({ env: { STEERBOT_MODEL_PROVIDER: provider, [variable]: `key-for-${provider}` } }).model;
      expect(model.apiKey, `${provider} with ${variable}`).toBe(`key-for-${provider}`);
      for (const other of Object.values(standard).filter((v) => v !== variable)) {
        expect(readConfig({ env: { STEERBOT_MODEL_PROVIDER: provider, [other]: 'not-this-one' } }).model.apiKey, `${provider} with ${other}`).toBeUndefined();
      }
    }
  });

  it('refuses to run with both host and runner disabled', () => {
    const issues = issuesOf(() => readConfig({ env: { STEERBOT_HOST: 'no', STEERBOT_RUNNER: '0' } }));
    expect(issues.map((i) => i.path)).toEqual(['host.enabled']);
  });
});

describe('redactConfig', () => {
  it('hides secrets and channel settings', () => {
    const file = writeConfig({
      channels: { telegram: { token: '123456789:AAAbbbCCCdddEEEfffGGGhhhIIIjjjKKKlll' }, webhooks: { crm: { secret: 'whsec-0123456789abcdef' } } },
    });
    const config = readConfig({
      file,
      env: { REDIS_URL: 'redis://:hunter2@redis:6379', REDIS_PASSWORD: 'pw-secret', OPENAI_API_KEY: 'sk-abcdefghijkl', DISCORD_BOT_TOKEN: 'discord-token-xyz' },
    });
    const text = JSON.stringify(redactConfig(config));
    for (const secret of ['hunter2', 'pw-secret', 'sk-abcdefghijkl', 'AAAbbb', 'whsec-0123456789abcdef', 'discord-token-xyz'])
      expect(text).not.toContain(secret);
    expect(text).toContain('redis:6379');
    expect(channelIds(config)).toEqual(['telegram', 'discord', 'webhook:crm', 'web']);
  });
});

describe('channels config', () => {
  it('enables a channel from its token variable and applies its other variables only then', () => {
    const off = readConfig({ env: { TELEGRAM_MODE: 'webhook', DISCORD_API_BASE: 'http://127.0.0.1:1/api' } });
    expect(Object.keys(off.channels)).toEqual(['web']);

    const on = readConfig({
      env: {
        TELEGRAM_BOT_TOKEN: '123:abc',
        TELEGRAM_MODE: 'webhook',
        TELEGRAM_WEBHOOK_SECRET: 'secret-token-0123456789',
        TELEGRAM_API_ROOT: 'http://127.0.0.1:9/tg',
        DISCORD_BOT_TOKEN: 'dtoken',
        DISCORD_API_BASE: 'http://127.0.0.1:9/api',
      },
    });
    expect(on.channels.telegram).toMatchObject({
      token: '123:abc',
      mode: 'webhook',
      webhookSecret: 'secret-token-0123456789',
      apiRoot: 'http://127.0.0.1:9/tg',
    });
    expect(on.channels.discord).toMatchObject({ token: 'dtoken', apiBase: 'http://127.0.0.1:9/api' });
  });

  it('applies webhook defaults', () => {
    const config = readConfig({ file: writeConfig({ channels: { webhooks: { crm: { secret: '0123456789abcdef' } } } }), env: {} });
    expect(config.channels.webhooks?.crm).toMatchObject({ secret: '0123456789abcdef', maxSkewSeconds: 300, maxMessageChars: 16_000, allowedSenders: [] });
  });

  it('names every bad channel field, without echoing secrets', () => {
    const file = writeConfig({
      channels: {
        webhooks: { crm: { secret: 'short-secret', callbackUrl: 'ftp://x', extra: 1 }, 'Bad Name': { secret: '0123456789abcdef' } },
        telegram: { token: '123:abc', mode: 'webhook' },
      },
    });
    const issues = issuesOf(() => readConfig({ file, env: {} }));
    expect(issues.map((i) => i.path).sort()).toEqual(
      [
        'channels.telegram.webhookSecret',
        'channels.webhooks.Bad Name',
        'channels.webhooks.crm.callbackUrl',
        'channels.webhooks.crm.extra',
        'channels.webhooks.crm.secret',
      ].sort(),
    );
    expect(JSON.stringify(issues)).not.toContain('short-secret');
  });

  it('does not echo a bad token from the environment', () => {
    const issues = issuesOf(() => readConfig({ env: { TELEGRAM_BOT_TOKEN: 'not a token with spaces' } }));
    expect(issues.map((i) => i.path)).toEqual(['channels.telegram.token']);
    expect(issues[0]!.message).toContain('env TELEGRAM_BOT_TOKEN');
    expect(JSON.stringify(issues)).not.toContain('spaces');
  });
});

describe('compaction settings', () => {
  it('default to threshold 0.8, 4 kept turns, 6000-character summaries and a 2000-entry tail', () => {
    expect(readConfig({ env: {} }).compaction).toEqual({ threshold: 0.8, keepRecentTurns: 4, maxSummaryChars: 6000, tailEntries: 2000 });
  });

  it('read fractional thresholds from the environment and name a bad one', () => {
    expect(readConfig({ env: { STEERBOT_COMPACTION_THRESHOLD: '0.65' } }).compaction.threshold).toBe(0.65);
    expect(() => readConfig({ env: { STEERBOT_COMPACTION_THRESHOLD: 'most' } })).toThrow(/compaction\.threshold.*STEERBOT_COMPACTION_THRESHOLD/s);
    expect(() => readConfig({ env: { STEERBOT_COMPACTION_THRESHOLD: '1.5' } })).toThrow(/compaction\.threshold/);
  });
});
