/**
 * Readiness that means something: `/readyz` names what is not ready; a
 * runner-only process serves probes and metrics of its own.
 */

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../app/config.js';
import { createHttpServer } from '../../host/http.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../../src/redis/local.js';
import { readinessReport } from '../../src/telemetry/readiness.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { type RestartableRedis, startRestartableRedis } from '../helpers/restartable-redis.js';
import { parseExposition } from './exposition.js';
import { type SteerbotProcess, startSteerbotProcess } from './steerbot-process.js';

const logger = createLogger({ level: 'silent' });

describe('readinessReport', () => {
  it('is ok when every probe is ready', async () => {
    expect(await readinessReport([{ name: 'a', check: () => ({ ready: true }) }])).toEqual({ ok: true });
  });

  it('names every part that is not ready, with its detail; a throwing probe is not ready', async () => {
    const report = await readinessReport([
      { name: 'redis', check: async () => ({ ready: true }) },
      { name: 'channel:discord', check: () => ({ ready: false, detail: 'gateway reconnecting' }) },
      {
        name: 'runner.worker',
        check: () => {
          throw new TypeError('boom');
        },
      },
    ]);
    expect(report).toEqual({
      ok: false,
      error: 'channel:discord gateway reconnecting; runner.worker check failed: TypeError',
      notReady: { 'channel:discord': 'gateway reconnecting', 'runner.worker': 'check failed: TypeError' },
    });
  });
});

describe('GET /readyz on the host server', () => {
  it('answers 503 naming a channel that is not ready, 200 once it is', async () => {
    const redis = new Redis(redisUrl());
    let gateway = false;
    const app = createHttpServer({
      config: DEFAULT_CONFIG,
      redis,
      logger,
      readiness: () => [{ name: 'channel:discord', check: () => (gateway ? { ready: true } : { ready: false, detail: 'gateway reconnecting' }) }],
    });
    try {
      const down = await app.inject({ method: 'GET', url: '/readyz' });
      expect(down.statusCode).toBe(503);
      expect(down.json()).toEqual({ ok: false, error: 'channel:discord gateway reconnecting', notReady: { 'channel:discord': 'gateway reconnecting' } });
      gateway = true;
      const up = await app.inject({ method: 'GET', url: '/readyz' });
      expect(up.statusCode).toBe(200);
      expect(up.json()).toEqual({ ok: true });
      // Liveness is not readiness.
      gateway = false;
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
      await redis.quit();
    }
  });
});

describe('a runner-only process', () => {
  let redis: RestartableRedis;
  let runner: SteerbotProcess;
  let url: string;

  beforeAll(async () => {
    redis = await startRestartableRedis();
    const port = await freePort();
    runner = await startSteerbotProcess({
      REDIS_URL: redis.url,
      STEERBOT_HOST: 'false',
      HOST: '127.0.0.1',
      PORT: String(port),
      STEERBOT_MODEL_PROVIDER: 'openai-compatible',
      OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
      STEERBOT_MODEL: 'm',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'm' is not in the model catalogue
    });
    url = `http://127.0.0.1:${port}`;
  }, 60_000);

  afterAll(async () => {
    await runner?.stop();
    await redis?.destroy();
  });

  it('serves /healthz, /readyz and /metrics on its own port', async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ok: true });
    const samples = parseExposition(await (await fetch(`${url}/metrics`)).text());
    expect(samples.get('steerbot_runs_active')).toBe(0);
    expect(samples.get('steerbot_queue_jobs{queue="steerbot-runs",state="waiting"}')).toBe(0);
  });

  it('answers 503 naming Redis while its Redis is down, and 200 again once it is back', async () => {
    await redis.stop();
    const down = await waitFor(
      async () => {
        const res = await fetch(`${url}/readyz`);
        return res.status === 503 ? ((await res.json()) as Record<string, unknown>) : undefined;
      },
      15_000,
      '/readyz answering 503',
    );
    expect(down).toMatchObject({ ok: false, notReady: { redis: 'unreachable' } });
    expect(String(down.error)).toContain('redis unreachable');
    // Still alive: the orchestrator must not restart it for an outage it cannot fix.
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    // A scrape during the outage answers (the queue gauges keep their last values).
    expect((await fetch(`${url}/metrics`)).status).toBe(200);

    await redis.start();
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200 || undefined, 20_000, '/readyz answering 200 again');
  }, 60_000);
});
