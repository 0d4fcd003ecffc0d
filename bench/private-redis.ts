/**
 * A private, non-persistent redis-server on a free port for benchmarks, so
 * command counts are not polluted by other clients of a shared Redis.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { startPrivateRedis } from '../src/redis/local.js';

/** Starts redis-server; falls back to REDIS_URL / 6379 (shared, counts may include others) when it is not installed. */
export async function privateRedis(): Promise<{ url: string; shared: boolean; stop(): Promise<void> }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'steerbot-bench-'));
  try {
    const server = await startPrivateRedis({ dataDir, persistent: false });
    return {
      url: server.url,
      shared: false,
      stop: async () => {
        await server.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch {
    await rm(dataDir, { recursive: true, force: true });
    return { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', shared: true, stop: async () => undefined };
  }
}

/** On a shared Redis (no private one could start), deletes what a run wrote under its prefix and its queues' BullMQ prefix. */
export async function dropRunKeys(client: Redis, shared: boolean, patterns: string[]): Promise<void> {
  if (!shared) return;
  for (const pattern of patterns) {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await client.unlink(...keys);
    } while (cursor !== '0');
  }
}

/** Calls per command from INFO commandstats (lower-case names; a script's own calls count too). */
export async function commandStats(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  return new Map([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])]));
}

/** Sum of `calls` in INFO commandstats for the given commands. */
export async function commandCalls(client: Redis, commands: string[]): Promise<number> {
  const stats = await commandStats(client);
  return commands.reduce((total, c) => total + (stats.get(c) ?? 0), 0);
}

/** Counts commands the client writes (each is one request on the wire; pipelining batches them). */
export function countSent(client: Redis): { count(): number } {
  let n = 0;
  const orig = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof orig>) => {
    n++;
    return orig(...args);
  }) as typeof client.sendCommand;
  return { count: () => n };
}
