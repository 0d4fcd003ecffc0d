/**
 * Tokens a usage hash (a person's or a conversation's budget counters) was
 * charged, over every day it holds: a test whose charge and read fall on
 * either side of midnight UTC reads the same sum.
 */
import type { RedisClient } from '../../src/redis/connection.js';

export async function tokensCharged(redis: RedisClient, usageKey: string): Promise<number> {
  const fields = await redis.hgetall(usageKey);
  return Object.entries(fields)
    .filter(([field]) => /^t:\d{4}-\d{2}-\d{2}$/.test(field))
    .reduce((sum, [, value]) => sum + Number(value), 0);
}
