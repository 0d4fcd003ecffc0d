import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, type SteerbotConfig } from '../app/config.js';
import { type StartHook, startApp } from '../app/start.js';
import type { HostContext, HostParts } from '../host/main.js';
import type { RunnerParts } from '../runner/main.js';
import type { AppContext } from '../src/app-context.js';
import { createLogger } from '../src/logger.js';
import { PrivateServers } from './helpers/private-servers.js';
import { redisUrl } from './helpers/redis.js';

const logger = createLogger({ level: 'silent' });

function testConfig(over: Partial<SteerbotConfig> = {}): SteerbotConfig {
  return {
    ...DEFAULT_CONFIG,
    redis: { ...DEFAULT_CONFIG.redis, url: redisUrl() },
    http: { ...DEFAULT_CONFIG.http, host: '127.0.0.1', port: 0 },
    ...over,
  };
}

/** Hooks that record when they start and stop. */
function recordingHooks(events: string[], runnerStop: () => Promise<void> = async () => {}) {
  const startRunner: StartHook<AppContext, RunnerParts> = async (ctx) => {
    events.push(`runner:start ${await ctx.redis.ping()}`);
    return {
      stop: async () => {
        events.push('runner:stop');
        await runnerStop();
      },
    };
  };
  const startHost: StartHook<HostContext, HostParts> = async (ctx) => {
    ctx.http.get('/hello', async () => ({ hello: 'from host' }));
    events.push('host:start');
    return { stop: async () => void events.push('host:stop') };
  };
  return { startRunner, startHost };
}

describe('startApp', () => {
  it('starts runner then host, serves HTTP, and stops ingress, host, runner in that order', async () => {
    const events: string[] = [];
    const app = await startApp({ config: testConfig(), logger, hooks: recordingHooks(events) });
    expect(events).toEqual(['runner:start PONG', 'host:start']);
    expect(app.ctx.redisUrl).toBe(redisUrl());
    const res = await fetch(`${app.address}/hello`);
    expect(await res.json()).toEqual({ hello: 'from host' });
    expect((await fetch(`${app.address}/readyz`)).status).toBe(200);

    await app.stop();
    expect(events).toEqual(['runner:start PONG', 'host:start', 'host:stop', 'runner:stop']);
    await expect(fetch(`${app.address}/healthz`)).rejects.toThrow();
    expect(app.ctx.redis.status).toBe('end');
    await app.stop(); // idempotent
  });

  it('gives parts their own connections through connectRedis', async () => {
    const app = await startApp({ config: testConfig(), logger, hooks: recordingHooks([]) });
    const own = app.ctx.connectRedis({ forBullmq: true });
    try {
      expect(await own.ping()).toBe('PONG');
      expect(own).not.toBe(app.ctx.redis);
    } finally {
      await own.quit();
      await app.stop();
    }
  });

  it('serves no HTTP and starts no host when the host is disabled', async () => {
    const events: string[] = [];
    const app = await startApp({ config: testConfig({ host: { ...DEFAULT_CONFIG.host, enabled: false } }), logger, hooks: recordingHooks(events) });
    expect(app.address).toBeUndefined();
    expect(events).toEqual(['runner:start PONG']);
    await app.stop();
  });

  it('stops waiting for a runner that overruns its grace', async () => {
    const events: string[] = [];
    const config = testConfig({ runner: { ...DEFAULT_CONFIG.runner, shutdownGraceMs: 0 } });
    let release = () => {};
    const hung = new Promise<void>((r) => (release = r));
    const app = await startApp({ config, logger, hooks: recordingHooks(events, () => hung) });
    const t0 = Date.now();
    await app.stop(); // bounded by grace (0) + 5 s slack
    expect(Date.now() - t0).toBeGreaterThanOrEqual(4900);
    expect(app.ctx.redis.status).toBe('end');
    release();
  }, 15_000);

  it('stops what it started when listening fails', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const { port } = blocker.address() as { port: number };
    const events: string[] = [];
    try {
      const config = testConfig({ http: { ...DEFAULT_CONFIG.http, host: '127.0.0.1', port } });
      await expect(startApp({ config, logger, hooks: recordingHooks(events) })).rejects.toThrow(/EADDRINUSE/);
      expect(events).toEqual(['runner:start PONG', 'host:start', 'host:stop', 'runner:stop']);
    } finally {
      blocker.close();
    }
  });

  it('starts the real host and runner by default', async () => {
    const app = await startApp({ config: testConfig(), logger });
    expect((await fetch(`${app.address}/healthz`)).status).toBe(200);
    await app.stop();
  });

  it("closes every connection its host and runner opened, the schedules feature's included", async () => {
    // A Redis of its own: the names of the connections are the same in every test's app.
    const servers = await PrivateServers.create('app-connections');
    try {
      const { url } = await servers.start('redis');
      const admin = servers.client(url);
      const names = async () =>
        String(await admin.client('LIST'))
          .split('\n')
          .flatMap((line) => /\bname=(\S+)/.exec(line)?.[1] ?? [])
          .filter((name) => name.startsWith('steerbot-'));
      const app = await startApp({ config: testConfig({ redis: { ...DEFAULT_CONFIG.redis, url } }), logger });
      expect(await names()).toEqual(expect.arrayContaining(['steerbot-host-schedules', 'steerbot-runner-schedules', 'steerbot-runner-fires']));
      await app.stop();
      const deadline = Date.now() + 5000;
      let left = await names();
      while (left.length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        left = await names();
      }
      expect(left).toEqual([]);
    } finally {
      await servers.stop();
    }
  });
});
