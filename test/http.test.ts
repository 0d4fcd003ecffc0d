import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../host/http.js';
import { InvalidInputError, RedisUnavailableError } from '../src/errors.js';
import { createLogger } from '../src/logger.js';
import { freePort } from '../src/redis/local.js';
import { redisUrl } from './helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const config = { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 2048, requestTimeoutMs: 60_000 } };

describe('http server', () => {
  let redis: Redis;
  let app: HttpServer;
  beforeAll(async () => {
    redis = new Redis(redisUrl());
    app = createHttpServer({ config, redis, logger });
    app.post('/echo', async (req) => ({ got: req.body }));
    app.get('/boom/:kind', async (req) => {
      const kind = (req.params as { kind: string }).kind;
      if (kind === 'redis') throw new RedisUnavailableError('connect ECONNREFUSED');
      if (kind === 'input') throw new InvalidInputError('text is too long');
      throw new Error('secret internals');
    });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await redis.quit();
  });

  it('GET /healthz answers 200 {ok:true}', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
  });

  it('GET /readyz answers 200 {ok:true} when Redis answers', async () => {
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
  });

  it('answers unknown routes with a JSON 404', async () => {
    const res = await app.inject({ method: 'GET', url: '/nope?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: 'no route for GET /nope' });
  });

  it('refuses a body over the configured limit with a JSON 413', async () => {
    const ok = await app.inject({ method: 'POST', url: '/echo', payload: { text: 'x'.repeat(1000) } });
    expect(ok.statusCode).toBe(200);
    const res = await app.inject({ method: 'POST', url: '/echo', payload: { text: 'x'.repeat(3000) } });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: expect.stringMatching(/too large/i) });
  });

  it('refuses malformed JSON with a JSON 400', async () => {
    const res = await app.inject({ method: 'POST', url: '/echo', payload: '{"a":', headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: expect.stringMatching(/json/i) });
  });

  it('maps typed errors to statuses and hides internal messages', async () => {
    const redisDown = await app.inject({ method: 'GET', url: '/boom/redis' });
    expect([redisDown.statusCode, redisDown.json()]).toEqual([503, { error: 'redis unreachable' }]);
    const badInput = await app.inject({ method: 'GET', url: '/boom/input' });
    expect([badInput.statusCode, badInput.json()]).toEqual([400, { error: 'text is too long' }]);
    const internal = await app.inject({ method: 'GET', url: '/boom/other' });
    expect([internal.statusCode, internal.json()]).toEqual([500, { error: 'internal error' }]);
  });
});

describe('request error logs', () => {
  it('name the request id, method and path (no query string) once per failed request, with secrets redacted', async () => {
    const chunks: string[] = [];
    const memory = createLogger({ level: 'info', destination: { write: (s: string) => void chunks.push(s) } });
    const redis = new Redis(redisUrl());
    const app = createHttpServer({ config, redis, logger: memory });
    app.get('/fails', async () => {
      throw new Error('upstream said token=123456:ABCdefGHIjklMNOpqrSTUvwxYZ0123456789');
    });
    try {
      const ok = await app.inject({ method: 'GET', url: '/healthz' });
      const res = await app.inject({ method: 'GET', url: '/fails?key=abc' });
      expect([ok.statusCode, res.statusCode]).toEqual([200, 500]);
      const lines = chunks
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, any>);
      // Successful requests write no log line at all; the failed one writes exactly one.
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ msg: 'request failed', method: 'GET', url: '/fails', reqId: expect.any(String) });
      expect(JSON.stringify(lines[0])).not.toContain('ABCdefGHI');
    } finally {
      await app.close();
      await redis.quit();
    }
  });
});

describe('GET /readyz with Redis unreachable', () => {
  it('answers 503 within about the ready timeout', async () => {
    const redis = new Redis(`redis://127.0.0.1:${await freePort()}`, { retryStrategy: () => 50 });
    redis.on('error', () => {});
    const app = createHttpServer({ config, redis, logger });
    try {
      const t0 = Date.now();
      const res = await app.inject({ method: 'GET', url: '/readyz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ ok: false, error: 'redis unreachable', notReady: { redis: 'unreachable' } });
      expect(Date.now() - t0).toBeLessThan(5000);
    } finally {
      await app.close();
      redis.disconnect();
    }
  });
});

describe('listen', () => {
  it('serves over real HTTP and resolves with the address', async () => {
    const redis = new Redis(redisUrl());
    const app = createHttpServer({ config, redis, logger });
    try {
      const address = await listen(app, { host: '127.0.0.1', port: 0 });
      expect(address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const res = await fetch(`${address}/healthz`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ ok: true });
    } finally {
      await app.close();
      await redis.quit();
    }
  });
});
