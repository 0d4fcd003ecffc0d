/**
 * Redis helpers for tests against a real Redis: a per-test key prefix and
 * cleanup. No vitest imports: child processes may load this file.
 */
import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import type { RedisClient } from 'steerbot/plugin';

/** The Redis the kit uses when a suite is given none: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
export function defaultRedisUrl(): string {
  return process.env.REDIS_URL || 'redis://127.0.0.1:6379';
}

/** A fresh key prefix, unique per call, e.g. `t3f9a0c1d2e`. Matches the config's prefix rule. */
export function testPrefix(): string {
  return `t${randomBytes(5).toString('hex')}`;
}

/** Deletes every key under `prefix:` (SCAN + UNLINK in batches of up to 500). */
export async function cleanupPrefix(client: RedisClient, prefix: string): Promise<number> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  let deleted = 0;
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      // In a cluster, keys of one batch may live in different slots: unlink one by one there.
      if (keys.length > 0) deleted += node === client ? await client.unlink(...keys) : await unlinkEach(client, keys);
    } while (cursor !== '0');
  }
  return deleted;
}

async function unlinkEach(client: RedisClient, keys: string[]): Promise<number> {
  const counts = await Promise.all(keys.map((k) => client.unlink(k)));
  return counts.reduce((a, b) => a + b, 0);
}
