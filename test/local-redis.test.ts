import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { pingRedis } from '../src/redis/connection.js';
import { ensureRedis, freePort, NO_REDIS_HELP } from '../src/redis/local.js';
import { redisUrl } from './helpers/redis.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'steerbot-local-redis-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A URL where nothing answers. */
async function deadUrl(): Promise<string> {
  return `redis://127.0.0.1:${await freePort()}`;
}

describe('ensureRedis', () => {
  it('returns a given URL without probing or starting anything', async () => {
    const r = await ensureRedis({ url: 'redis://example.invalid:6379', dataDir: tempDir(), persistent: false });
    expect(r).toMatchObject({ url: 'redis://example.invalid:6379', started: false });
    await r.stop();
  });

  it('uses a Redis that answers on the probe address', async () => {
    const r = await ensureRedis({ dataDir: tempDir(), persistent: false, probeUrl: redisUrl() });
    expect(r).toMatchObject({ url: redisUrl(), started: false });
  });

  it('starts a private redis-server when nothing answers, and stop() ends it', async () => {
    const r = await ensureRedis({ dataDir: tempDir(), persistent: false, probeUrl: await deadUrl() });
    expect(r.started).toBe(true);
    expect(r.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);
    expect(await pingRedis(r.url, 1000)).toBe(true);
    await r.stop();
    expect(await pingRedis(r.url, 500)).toBe(false);
    await r.stop(); // idempotent
  });

  it('keeps data across restarts when persistent', async () => {
    const dataDir = tempDir();
    const first = await ensureRedis({ dataDir, persistent: true, probeUrl: await deadUrl() });
    const c1 = new Redis(first.url);
    await c1.set('kept', 'yes');
    await c1.quit();
    await first.stop();

    const second = await ensureRedis({ dataDir, persistent: true, probeUrl: await deadUrl() });
    const c2 = new Redis(second.url);
    try {
      expect(await c2.get('kept')).toBe('yes');
    } finally {
      await c2.quit();
      await second.stop();
    }
  });

  it('reuses a persistent server a previous run left behind instead of starting a second one on its data', async () => {
    const dataDir = tempDir();
    const orphan = await ensureRedis({ dataDir, persistent: true, probeUrl: await deadUrl() });
    // No stop(): as if the process that started it had been killed.
    const next = await ensureRedis({ dataDir, persistent: true, probeUrl: await deadUrl() });
    try {
      expect(next).toMatchObject({ url: orphan.url, started: true });
    } finally {
      await next.stop();
    }
    expect(await pingRedis(orphan.url, 500)).toBe(false);
    await orphan.stop(); // already gone: returns at once
  });

  it('keeps nothing across restarts when not persistent', async () => {
    const dataDir = tempDir();
    const first = await ensureRedis({ dataDir, persistent: false, probeUrl: await deadUrl() });
    const c1 = new Redis(first.url);
    await c1.set('kept', 'yes');
    await c1.quit();
    await first.stop();

    const second = await ensureRedis({ dataDir, persistent: false, probeUrl: await deadUrl() });
    const c2 = new Redis(second.url);
    try {
      expect(await c2.get('kept')).toBeNull();
    } finally {
      await c2.quit();
      await second.stop();
    }
  });

  it('explains how to get Redis when redis-server is missing', async () => {
    const attempt = ensureRedis({ dataDir: tempDir(), persistent: false, probeUrl: await deadUrl(), redisServerBin: join(tempDir(), 'no-redis-server') });
    await expect(attempt).rejects.toThrow(NO_REDIS_HELP);
    await expect(attempt).rejects.toThrow(/apt-get install redis-server.*docker compose up redis.*REDIS_URL/s);
  });

  it('reports the server output when redis-server cannot start', async () => {
    // `false` exits at once: a stand-in for a redis-server that refuses its arguments.
    const attempt = ensureRedis({ dataDir: tempDir(), persistent: false, probeUrl: await deadUrl(), redisServerBin: '/bin/false', startTimeoutMs: 5000 });
    await expect(attempt).rejects.toThrow(/did not start/);
  });
});
