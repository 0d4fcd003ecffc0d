/**
 * What the rate limits cost ingest: throughput with `dispatch.rateLimit` off,
 * on with buckets that never run dry (every message pays the bucket check and
 * write), and on with buckets of one message (almost every message takes the
 * refusal path). Rounds alternate so drift hits every variant alike; prints
 * medians and their ratios to "off": client-side updates per second (noisy on
 * a shared machine) and Redis-side script time per update (INFO commandstats,
 * what the limits add to the one round trip).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Dispatch, type RateLimitOptions } from '../src/protocol/index.js';
import { privateRedis } from './private-redis.js';

const UPDATES = Number(process.env.BENCH_UPDATES ?? 10_000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const VARIANTS: Array<{ name: string; rateLimit?: RateLimitOptions }> = [
  { name: 'off' },
  {
    name: 'on, never refusing',
    rateLimit: { user: { capacity: 1_000_000, refillPerMinute: 1_000_000 }, conversation: { capacity: 1_000_000, refillPerMinute: 1_000_000 } },
  },
  { name: 'on, refusing', rateLimit: { user: { capacity: 1, refillPerMinute: 0.001 }, conversation: { capacity: 1, refillPerMinute: 0.001 } } },
];

async function unlinkPrefix(client: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await client.unlink(...keys);
  } while (cursor !== '0');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Redis-side microseconds spent in scripts since the last CONFIG RESETSTAT. */
async function scriptUsec(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval|fcall):calls=\d+,usec=(\d+)/gm)) total += Number(m[1]);
  return total;
}

async function round(client: Redis, prefix: string, rateLimit: RateLimitOptions | undefined): Promise<{ perSec: number; refused: number }> {
  const dispatch = new Dispatch({ client, prefix, ...(rateLimit && { rateLimit }) });
  let next = 0;
  let refused = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < UPDATES) {
        const i = next++;
        const r = await dispatch.ingest({
          conversationId: `telegram:${i % CONVERSATIONS}`,
          updateKey: `telegram:${i}`,
          sender: { id: `u${i % 7}` },
          text: `message ${i} with a few words in it`,
        });
        if (r.kind === 'refused') refused++;
      }
    }),
  );
  return { perSec: UPDATES / ((performance.now() - t0) / 1000), refused };
}

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const base = `rlb${randomBytes(3).toString('hex')}`;
  const admin = new Redis(redis.url);
  const rates = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
  const usecs = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
  const refusals = new Map<string, number>();
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const v of VARIANTS) {
        const prefix = `${base}${r}${v.name.length}`;
        await admin.config('RESETSTAT');
        const { perSec, refused } = await round(client, prefix, v.rateLimit);
        usecs.get(v.name)!.push((await scriptUsec(admin)) / UPDATES);
        rates.get(v.name)!.push(perSec);
        refusals.set(v.name, refused);
        await unlinkPrefix(client, prefix); // not FLUSHDB: the fallback Redis may be shared
      }
    }
    const off = median(rates.get('off')!);
    const offUsec = median(usecs.get('off')!);
    console.log(
      `rate limits on ingest: ${UPDATES} updates, ${CONVERSATIONS} conversations, concurrency ${CONCURRENCY}, ${ROUNDS} rounds (median)${redis.shared ? ' — shared Redis: server times include other clients' : ''}`,
    );
    for (const v of VARIANTS) {
      const m = median(rates.get(v.name)!);
      const u = median(usecs.get(v.name)!);
      console.log(
        `  ${v.name.padEnd(20)} ${Math.round(m).toString().padStart(7)} updates/s (ratio ${(m / off).toFixed(2)})  ${u.toFixed(1).padStart(5)} µs of script per update (ratio ${(u / offUsec).toFixed(2)})  refused ${refusals.get(v.name)}`,
      );
    }
  } finally {
    client.disconnect();
    admin.disconnect();
    await redis.stop();
  }
}
