/**
 * Redis memory per conversation and per message, with and without retention
 * (`npm run bench -- memory`). Each message is one whole turn driven through
 * the real scripts: ingest → acquire → append (`model.step`) → outbox claim +
 * acknowledgement → finish, and a compaction (`compaction-commit`, keeping 4
 * turns) every 10 turns. Each variant runs on its own private redis-server;
 * bytes are INFO memory `used_memory` after minus before.
 *
 * "With retention" is measured once its horizons have passed: ended runs'
 * hashes and the outbox get a TTL of 1 s (instead of 3 and 7 days), the record
 * is trimmed behind the checkpoint to the newest 20 entries, and the bench
 * waits for the TTLs and walks the keyspace (SCAN expires what it meets), so
 * it shows what a conversation costs once retention has done its work.
 * Dedupe keys (24 h) are counted in both.
 *
 * Then one conversation that stays active for BENCH_TURNS (default 10 000)
 * turns, with the default TTLs (3 and 7 days, never reached), without and
 * with the count bound (`retention.indexMaxEntries`): it prints the element
 * counts of the outbox, its index and the run index, and the bytes.
 * BENCH_MEMORY_CASE=many or =active runs only the one part.
 *
 * BENCH_MEMORY_CASE=defaults is the whole app at its defaults instead: the
 * soak (`bench/soak.ts`, BENCH_MINUTES default 5 at BENCH_RATE 50 msg/s over
 * 500 conversations, webhook channel, BullMQ, the local agent), then what
 * Redis holds beyond the record per message, by key family, against the
 * goal of at most 1 KB.
 *
 * Scale: BENCH_CONVERSATIONS (default 2000) × BENCH_MESSAGES (default 50);
 * 10 000 × 50 takes several minutes per variant on a shared 2-core
 * machine, so the default is scaled down (printed). Per-conversation and
 * per-message figures do not depend on the count.
 */
import { Redis } from 'ioredis';
import { ConversationState, Dispatch, type RunRef, Runs } from '../src/protocol/index.js';
import { conversationKeys } from '../src/redis/keys.js';
import { runScript } from '../src/scripts/index.js';
import { checkReply } from '../src/scripts/results.js';
import { privateRedis } from './private-redis.js';

const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 2_000);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 50);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const TURNS = Number(process.env.BENCH_TURNS ?? 10_000);
const PREFIX = 'sb';
const CHECKPOINT_KEY = 'runner.compaction.checkpoint';

const WORDS = 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call'.split(' ');
const words = (min: number, max: number) =>
  Array.from({ length: min + Math.floor(Math.random() * (max - min)) }, () => WORDS[Math.floor(Math.random() * WORDS.length)]).join(' ');

interface Variant {
  name: string;
  endedRunTtlSeconds: number;
  outboxTtlSeconds: number;
  recordTrimAfterEntries: number;
  /** `retention.indexMaxEntries`: ended runs and acknowledged outbox records kept per conversation (0: no count bound). */
  indexMaxEntries: number;
}

/** One conversation's `messages` turns, in order. */
async function conversation(
  client: Redis,
  dispatch: Dispatch,
  runs: Runs,
  state: ConversationState,
  v: Variant,
  c: number,
  messages = MESSAGES,
): Promise<void> {
  const cid = `telegram:${c}`;
  const k = conversationKeys(PREFIX, cid);
  const messageSeqs: number[] = [];
  let checkpoint: string | undefined;
  for (let m = 0; m < messages; m++) {
    const r = await dispatch.ingest({
      conversationId: cid,
      updateKey: `telegram:${c}-${m}`,
      sender: { id: `u${c}`, name: 'Ada' },
      text: words(20, 60),
      messageId: String(m),
    });
    if (r.kind !== 'new-run') throw new Error(`expected a new run, got ${r.kind}`);
    messageSeqs.push(r.seq);
    const acquired = await runs.acquire(cid, r.runId, 'bench-worker');
    const run: RunRef = { conversationId: cid, runId: r.runId, token: acquired.token };
    const answer = words(40, 120);
    await runs.append(run, {
      v: 1,
      kind: 'model.step',
      at: Date.now(),
      run: r.runId,
      token: run.token,
      step: 0,
      messages: [{ role: 'assistant', content: [{ type: 'text', text: answer }] }],
      finishReason: 'stop',
      usage: { inputTokens: 900, outputTokens: 120 },
    });
    const key = `${r.runId}:${r.seq}:0`;
    checkReply(
      'outbox-claim',
      await runScript(
        client,
        'outbox-claim',
        [k.outbox, k.run(r.runId), k.outboxIndex],
        [key, run.token, '{"status":"possibly-dispatched"}', v.outboxTtlSeconds, v.indexMaxEntries],
      ),
    );
    checkReply(
      'outbox-set',
      await runScript(
        client,
        'outbox-set',
        [k.outbox, k.run(r.runId)],
        [key, run.token, JSON.stringify({ status: 'acknowledged', messageId: String(100_000 + m) }), v.outboxTtlSeconds],
      ),
    );
    if (m % 10 === 9 && m >= 5) {
      // Keep the last 4 whole turns: cover up to the run.ended right before turn m-4's message.
      const coversUntil = messageSeqs[m - 4]! - 1;
      const value = {
        schema_version: 1,
        conversation_id: cid,
        summary: words(80, 120),
        covers_until: coversUntil,
        tokens_before: 9000,
        tokens_after: 2500,
        created_at: Date.now(),
        summarizer: 'llm',
      };
      await state.commitCompaction(run, {
        checkpoint: { key: CHECKPOINT_KEY, value, expect: checkpoint === undefined ? { kind: 'absent' } : { kind: 'equals', raw: checkpoint } },
        entry: {
          v: 1,
          kind: 'compaction',
          at: Date.now(),
          run: r.runId,
          covers_until: coversUntil,
          tokens_before: 9000,
          tokens_after: 2500,
          summarizer: 'llm',
        },
        compactRequestedSeq: 0,
      });
      checkpoint = JSON.stringify(value);
    }
    const fin = await runs.finish(run, 'completed');
    if (fin.kind !== 'ended' || fin.successor) throw new Error('expected the run to end without a successor');
  }
}

/** Removes the dedupe keys (one per update, 24 h), to measure what they account for; returns `used_memory` after. */
async function dropDedupeKeys(client: Redis): Promise<number> {
  let cursor = '0';
  do {
    const [next, found] = await client.scan(cursor, 'MATCH', `${PREFIX}:*:dedupe:*`, 'COUNT', 1000);
    cursor = next;
    if (found.length > 0) await client.unlink(...found);
  } while (cursor !== '0');
  await new Promise((resolve) => setTimeout(resolve, 200)); // UNLINK frees in the background
  return usedMemory(client);
}

function protocol(client: Redis, v: Variant): { dispatch: Dispatch; runs: Runs; state: ConversationState } {
  const retention = { endedRunTtlSeconds: v.endedRunTtlSeconds, recordTrimAfterEntries: v.recordTrimAfterEntries, indexMaxEntries: v.indexMaxEntries };
  const options = { client, prefix: PREFIX, retention };
  return { dispatch: new Dispatch(options), runs: new Runs(options), state: new ConversationState(options) };
}

async function usedMemory(client: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await client.info('memory'))?.[1]);
}

/** A warm protocol on a private redis-server of its own (stopped after `fn`), with the memory it used before `fn`. */
async function onPrivateRedis<T>(v: Variant, fn: (c: { client: Redis; before: number } & ReturnType<typeof protocol>) => Promise<T>): Promise<T> {
  const redis = await privateRedis();
  if (redis.shared) throw new Error('the memory bench needs its own redis-server (none installed)');
  const client = new Redis(redis.url);
  try {
    const p = protocol(client, v);
    // Scripts loaded and the connection warm before the baseline.
    await p.dispatch.status('telegram:warmup');
    return await fn({ client, before: await usedMemory(client), ...p });
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

async function measure(v: Variant): Promise<{ bytes: number; dedupeBytes: number; keys: number; seconds: number }> {
  return onPrivateRedis(v, async ({ client, before, dispatch, runs, state }) => {
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < CONVERSATIONS) await conversation(client, dispatch, runs, state, v, next++);
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    if (v.endedRunTtlSeconds > 0) {
      await new Promise((resolve) => setTimeout(resolve, (Math.max(v.endedRunTtlSeconds, v.outboxTtlSeconds) + 1) * 1000));
      // SCAN expires the keys it meets whose TTL passed, as Redis' own expiry cycle would in time.
      let cursor = '0';
      do [cursor] = await client.scan(cursor, 'COUNT', 1000);
      while (cursor !== '0');
    }
    const after = await usedMemory(client);
    const keys = await client.dbsize();
    return { bytes: after - before, dedupeBytes: after - (await dropDedupeKeys(client)), keys, seconds };
  });
}

/** What one conversation holds after `TURNS` turns without a pause (its runs' and records' TTLs never reached). */
interface ActiveResult {
  bytes: number;
  dedupeBytes: number;
  outbox: number;
  outboxIndex: number;
  runIndex: number;
  runHashes: number;
  log: number;
  indexBytes: number;
  seconds: number;
}

async function measureActive(v: Variant): Promise<ActiveResult> {
  return onPrivateRedis(v, async ({ client, before, dispatch, runs, state }) => {
    const t0 = performance.now();
    await conversation(client, dispatch, runs, state, v, 0, TURNS);
    const seconds = (performance.now() - t0) / 1000;
    const k = conversationKeys(PREFIX, 'telegram:0');
    const [outbox, outboxIndex, runIndex, log] = await Promise.all([
      client.hlen(k.outbox),
      client.zcard(k.outboxIndex),
      client.zcard(k.runs),
      client.xlen(k.log),
    ]);
    let runHashes = 0;
    let cursor = '0';
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', `${k.base}run:*`, 'COUNT', 1000);
      cursor = next;
      runHashes += found.length;
    } while (cursor !== '0');
    const usage = await Promise.all([k.outbox, k.outboxIndex, k.runs].map((key) => client.memory('USAGE', key, 'SAMPLES', '0')));
    const indexBytes = usage.reduce<number>((a, b) => a + Number(b ?? 0), 0);
    const after = await usedMemory(client);
    return { bytes: after - before, dedupeBytes: after - (await dropDedupeKeys(client)), outbox, outboxIndex, runIndex, runHashes, log, indexBytes, seconds };
  });
}

/** One conversation that stays active for `TURNS` turns: the indexes stay at the count bound instead of growing with every turn. */
async function activeConversation(): Promise<void> {
  console.log(`\none conversation active for ${TURNS} turns (ended runs 3 days, outbox 7 days; record trimmed to the newest 20 behind the checkpoint)`);
  const base = { endedRunTtlSeconds: 259_200, outboxTtlSeconds: 604_800, recordTrimAfterEntries: 20 };
  const variants: Variant[] = [
    { name: 'no count bound', ...base, indexMaxEntries: 0 },
    { name: 'indexMaxEntries 100', ...base, indexMaxEntries: 100 },
  ];
  const results: ActiveResult[] = [];
  for (const v of variants) {
    const r = await measureActive(v);
    results.push(r);
    console.log(
      `${v.name.padEnd(20)} outbox ${r.outbox}  outbox_at ${r.outboxIndex}  runs ${r.runIndex}  run hashes ${r.runHashes}  log ${r.log}` +
        `  indexes ${r.indexBytes} B  conversation ${r.bytes} B (dedupe keys, 24 h: ${r.dedupeBytes} B)  ${r.seconds.toFixed(1)} s of turns`,
    );
  }
  const [off, on] = results as [ActiveResult, ActiveResult];
  console.log(
    `ratio bounded / unbounded: indexes ${(on.indexBytes / off.indexBytes).toFixed(3)}, conversation ${(on.bytes / off.bytes).toFixed(3)}` +
      ` (${((on.bytes - on.dedupeBytes) / (off.bytes - off.dedupeBytes)).toFixed(3)} without the dedupe keys)`,
  );
}

export async function main(): Promise<void> {
  if (process.env.BENCH_MEMORY_CASE === 'defaults') return (await import('./soak.js')).main();
  if (process.env.BENCH_MEMORY_CASE === 'active') return activeConversation();
  const total = CONVERSATIONS * MESSAGES;
  console.log(
    `memory: ${CONVERSATIONS} conversations × ${MESSAGES} messages (${total} turns)${CONVERSATIONS < 10_000 ? '; scaled down from 10 000 × 50 (BENCH_CONVERSATIONS=10000 for full scale)' : ''}`,
  );
  const variants: Variant[] = [
    { name: 'without retention', endedRunTtlSeconds: 0, outboxTtlSeconds: 604_800, recordTrimAfterEntries: 0, indexMaxEntries: 0 },
    { name: 'with retention', endedRunTtlSeconds: 1, outboxTtlSeconds: 1, recordTrimAfterEntries: 20, indexMaxEntries: 100 },
  ];
  const results = [];
  for (const v of variants) {
    const r = await measure(v);
    results.push(r);
    console.log(
      `${v.name.padEnd(18)} ${(r.bytes / CONVERSATIONS).toFixed(0).padStart(8)} B/conversation  ${(r.bytes / total).toFixed(0).padStart(6)} B/message` +
        `  (dedupe keys, 24 h: ${(r.dedupeBytes / total).toFixed(0)} B/message)  ${r.keys} keys  ${r.seconds.toFixed(1)} s of turns`,
    );
  }
  const [without, withR] = results;
  console.log(`ratio with / without retention: ${(withR!.bytes / without!.bytes).toFixed(3)}`);
  console.log(`ratio without dedupe keys: ${((withR!.bytes - withR!.dedupeBytes) / (without!.bytes - without!.dedupeBytes)).toFixed(3)}`);
  if (process.env.BENCH_MEMORY_CASE !== 'many') await activeConversation();
}
