import { describe, expect, it } from 'vitest';
import { pingRedis } from '../src/redis/connection.js';
import { redisUrl, testPrefix } from './helpers/redis.js';

describe('test setup', () => {
  it('provides a Redis that answers, also as process.env.REDIS_URL', async () => {
    expect(process.env.REDIS_URL).toBe(redisUrl());
    expect(await pingRedis(redisUrl(), 1000)).toBe(true);
  });

  it('gives a fresh valid prefix each time', () => {
    const a = testPrefix();
    expect(a).toMatch(/^[A-Za-z0-9_-]{1,32}$/);
    expect(testPrefix()).not.toBe(a);
  });
});
