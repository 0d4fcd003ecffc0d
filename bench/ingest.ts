/**
 * Ingest throughput through the TypeScript API, Redis round trips per update
 * (from INFO commandstats deltas and from the client's own command count),
 * and the ratio to a no-op EVALSHA loop at the same concurrency. Ingest
 * batches the updates in flight into shared script calls (group commit, at
 * most 16 per call), so it makes fewer than one round trip per update; the
 * no-op loop makes one per call. Then the cost of tracing on the host's
 * ingest path, on and off in one run (`ingest-tracing.ts`).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Dispatch } from '../src/protocol/index.js';
import { conversationKeys } from '../src/redis/keys.js';
import { runScript } from '../src/scripts/index.js';
import { tracingComparison } from './ingest-tracing.js';
import { commandCalls, countSent, privateRedis } from './private-redis.js';

const UPDATES = Number(process.env.BENCH_UPDATES ?? 20_000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 1_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

const WORDS = 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call'.split(' ');
function text(): string {
  const n = 20 + Math.floor(Math.random() * 80); // 20-100 words: ~100-600 characters
  return Array.from({ length: n }, () => WORDS[Math.floor(Math.random() * WORDS.length)]).join(' ');
}

async function pool(n: number, concurrency: number, task: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await task(next++);
    }),
  );
  return performance.now() - t0;
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

/** Redis-side microseconds per call of `evalsha` since the last CONFIG RESETSTAT. */
async function redisUsecPerCall(admin: Redis): Promise<number> {
  const m = /^cmdstat_evalsha:.*usec_per_call=([\d.]+)/m.exec(await admin.info('commandstats'));
  return m ? Number(m[1]) : NaN;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const admin = new Redis(redis.url);
  const base = `bench${randomBytes(3).toString('hex')}`;
  const texts = Array.from({ length: UPDATES }, () => text());
  const messages = Array.from({ length: UPDATES }, (_, i) => ({
    conversationId: `telegram:${i % CONVERSATIONS}`,
    updateKey: `telegram:${i}`,
    sender: { id: `u${i % CONVERSATIONS}`, name: 'Ada' },
    text: texts[i]!,
    messageId: String(i),
  }));
  // Warm-up: loads the scripts (EVALSHA misses once, then EVAL) and JIT outside the measurement.
  const warm = new Dispatch({ client, prefix: `${base}w` });
  await pool(2000, CONCURRENCY, (i) => warm.ingest({ ...messages[i]!, conversationId: `warm:${i % 50}` }));
  await pool(2000, CONCURRENCY, () => runScript(client, 'noop', [conversationKeys(base, 'warm:1').meta], []));

  const sent = countSent(client);
  const rows: Array<{ ingest: number; noop: number; trips: number; cmds: number; redisIngest: number; redisNoop: number }> = [];
  // Rounds alternate ingest and no-op so both see the same machine load; each round ingests fresh conversations.
  for (let round = 0; round < ROUNDS; round++) {
    const dispatch = new Dispatch({ client, prefix: `${base}r${round}` });
    await admin.config('RESETSTAT');
    const before = await commandCalls(admin, ['evalsha', 'eval']);
    const sentBefore = sent.count();
    const ingestMs = await pool(UPDATES, CONCURRENCY, (i) => dispatch.ingest(messages[i]!));
    const trips = ((await commandCalls(admin, ['evalsha', 'eval'])) - before) / UPDATES;
    const cmds = (sent.count() - sentBefore) / UPDATES;
    const redisIngest = await redisUsecPerCall(admin);

    await admin.config('RESETSTAT');
    const noopKeys = Array.from({ length: CONVERSATIONS }, (_, i) => conversationKeys(`${base}r${round}`, `telegram:${i}`).meta);
    const noopMs = await pool(UPDATES, CONCURRENCY, (i) => runScript(client, 'noop', [noopKeys[i % CONVERSATIONS]!], []));
    const redisNoop = await redisUsecPerCall(admin);
    rows.push({ ingest: (UPDATES / ingestMs) * 1000, noop: (UPDATES / noopMs) * 1000, trips, cmds, redisIngest, redisNoop });
  }

  console.log(
    `ingest benchmark: ${UPDATES} updates × ${ROUNDS} rounds, ${CONVERSATIONS} conversations, 100-600 character messages, concurrency ${CONCURRENCY}, one connection${redis.shared ? ' (SHARED redis: counts may include other clients)' : ' (private redis-server)'}`,
  );
  rows.forEach((r, i) => {
    console.log(
      `  round ${i + 1}: ingest ${r.ingest.toFixed(0).padStart(6)} updates/s (redis ${r.redisIngest.toFixed(1)} µs/call) · no-op ${r.noop.toFixed(0).padStart(6)} calls/s (redis ${r.redisNoop.toFixed(1)} µs/call) · ratio ${((r.ingest / r.noop) * 100).toFixed(1)} %`,
    );
  });
  const ratios = rows.map((r) => (r.ingest / r.noop) * 100);
  console.log(`  median ingest rate:          ${median(rows.map((r) => r.ingest)).toFixed(0)} updates/s`);
  console.log(`  median no-op EVALSHA rate:   ${median(rows.map((r) => r.noop)).toFixed(0)} calls/s`);
  console.log(
    `  ratio ingest / no-op:        ${median(ratios).toFixed(1)} % median of rounds (${ratios.map((x) => x.toFixed(0)).join(', ')} %)   (target >= 50 %)`,
  );
  console.log(`  round trips per update:      ${median(rows.map((r) => r.trips)).toFixed(3)} (INFO commandstats evalsha+eval delta)`);
  console.log(`  client commands per update:  ${median(rows.map((r) => r.cmds)).toFixed(3)} (commands written by the client)`);
  // Redis time per update: the script's µs per call (nested commands included) × calls per update.
  const perUpdate = median(rows.map((r) => r.redisIngest * r.trips));
  console.log(
    `  redis time per update:       ${perUpdate.toFixed(1)} µs median of rounds (${rows.map((r) => (r.redisIngest * r.trips).toFixed(1)).join(', ')})   (target <= 10 µs: ${perUpdate <= 10 ? 'met' : 'not met'})`,
  );
  // Tracing off and on, in child processes on the same Redis: with AsyncLocalStorage on async_hooks (Node 22's
  // default) and on AsyncContextFrame (`--experimental-async-context-frame`, Node 24's default).
  // Last, the same with 10 % of updates sampled (what a busy deployment would configure).
  // Node 24 runs on AsyncContextFrame by default and no longer takes the flag: one pass there.
  const frameFlag = process.allowedNodeEnvironmentFlags.has('--experimental-async-context-frame');
  const runtime = `Node ${process.versions.node.split('.')[0]}`;
  const passes: ReadonlyArray<readonly [boolean, number]> = frameFlag
    ? [
        [false, 1],
        [true, 1],
        [false, 0.1],
      ]
    : [
        [false, 1],
        [false, 0.1],
      ];
  for (const [frame, ratio] of passes) {
    const r = await tracingComparison(redis.url, frame, ratio);
    const label = `${runtime}${frame ? ' + async context frame' : ''}, ${ratio === 1 ? 'every update sampled' : `${ratio * 100} % sampled`}`;
    const pass = (p: { rate: number; cpuUs: number }) => `${p.rate.toFixed(0)} updates/s, ${p.cpuUs.toFixed(1)} µs CPU/update`;
    console.log(`  tracing (${label}; host ingest path, OTLP/HTTP JSON to a sink process):`);
    console.log(`    off ${pass(r.off)} · on ${pass(r.on)} · floor (one bare exported span per update) ${pass(r.floor)}`);
    console.log(
      `    ratio on / off:              ${r.ratio.toFixed(1)} % median of ${r.ratios.length} rounds (${r.ratios.map((x) => x.toFixed(0)).join(', ')} %)${ratio === 1 ? '   (target >= 90 %)' : ''}`,
    );
    console.log(`    ratio floor / off:           ${r.floorRatio.toFixed(1)} % (what one exported span per update costs on this machine)`);
    console.log(
      `    ratio on / floor:            ${r.onFloor.toFixed(1)} %${ratio === 1 ? '   (target >= 90 %: steerbot adds little beyond the span itself)' : ''}; spans exported ${r.exported} of ~${r.sampled}`,
    );
  }

  await client.quit();
  await admin.quit();
  await redis.stop();
}
