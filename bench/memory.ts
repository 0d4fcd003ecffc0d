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
 * Scale: BENCH_CONVERSATIONS (default 2000) × BENCH_MESSAGES (default 50);
 * 10 000 × 50 takes several minutes per variant on a shared 2-core
 * machine, so the default is scaled down (printed). Per-conversation and
 * per-message figures do not depend on the count.
 */
import { Redis } from 'ioredis';
import { conversationKeys } from '../src/keys.js';
import { ConversationState, Dispatch, type RunRef, Runs } from '../src/protocol/index.js';
import { runScript } from '../src/scripts/index.js';
import { checkReply } from '../src/scripts/results.js';
import { privateRedis } from './private-redis.js';

const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 2_000);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 50);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
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
}

/** One conversation's turns, in order. */
async function conversation(client: Redis, dispatch: Dispatch, runs: Runs, state: ConversationState, v: Variant, c: number): Promise<void> {
  const cid = `telegram:${c}`;
  const k = conversationKeys(PREFIX, cid);
  const messageSeqs: number[] = [];
  let checkpoint: string | undefined;
  for (let m = 0; m < MESSAGES; m++) {
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
        [key, run.token, '{"status":"possibly-dispatched"}', v.outboxTtlSeconds],
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

async function usedMemory(client: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await client.info('memory'))?.[1]);
}

async function measure(v: Variant): Promise<{ bytes: number; dedupeBytes: number; keys: number; seconds: number }> {
  const redis = await privateRedis();
  if (redis.shared) throw new Error('the memory bench needs its own redis-server (none installed)');
  const client = new Redis(redis.url);
  try {
    const options = { client, prefix: PREFIX, retention: { endedRunTtlSeconds: v.endedRunTtlSeconds, recordTrimAfterEntries: v.recordTrimAfterEntries } };
    const dispatch = new Dispatch(options);
    const runs = new Runs(options);
    const state = new ConversationState(options);
    // Scripts loaded and the connection warm before the baseline.
    await dispatch.status('telegram:warmup');
    const before = await usedMemory(client);
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
    // What the dedupe keys (one per update, 24 h) account for: measured by removing them.
    let cursor = '0';
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', `${PREFIX}:*:dedupe:*`, 'COUNT', 1000);
      cursor = next;
      if (found.length > 0) await client.unlink(...found);
    } while (cursor !== '0');
    await new Promise((resolve) => setTimeout(resolve, 200)); // UNLINK frees in the background
    return { bytes: after - before, dedupeBytes: after - (await usedMemory(client)), keys, seconds };
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

export async function main(): Promise<void> {
  const total = CONVERSATIONS * MESSAGES;
  console.log(
    `memory: ${CONVERSATIONS} conversations × ${MESSAGES} messages (${total} turns)${CONVERSATIONS < 10_000 ? '; scaled down from 10 000 × 50 (BENCH_CONVERSATIONS=10000 for full scale)' : ''}`,
  );
  const variants: Variant[] = [
    { name: 'without retention', endedRunTtlSeconds: 0, outboxTtlSeconds: 604_800, recordTrimAfterEntries: 0 },
    { name: 'with retention', endedRunTtlSeconds: 1, outboxTtlSeconds: 1, recordTrimAfterEntries: 20 },
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
}
