/**
 * Resuming a long conversation: the time to assemble a run's prompt
 * (`loadPrompt`) for records of 1k, 10k and 100k entries, with and without a
 * valid compaction checkpoint, and the 100k / 1k ratio of each (target with a
 * checkpoint: ≤ 1.5). Then 100 consecutive short runs in one conversation
 * through the real protocol with the pressure trigger: how many times the
 * summarizer was called against how many times the estimate crossed the
 * threshold (target: equal).
 */
import { randomBytes } from 'node:crypto';
import type { ModelMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { CHECKPOINT_KEY, type Checkpoint } from '../runner/compaction/checkpoint.js';
import { Calibrator, estimateMessages, estimateTokens } from '../runner/compaction/estimate.js';
import { loadPrompt } from '../runner/compaction/load.js';
import { compactIfNeeded } from '../runner/compaction/pressure.js';
import { ConversationState, Dispatch, Runs } from '../src/protocol/index.js';
import type { RecordEntry } from '../src/record/entries.js';
import { conversationKeys } from '../src/redis/keys.js';
import { countSent, privateRedis } from './private-redis.js';

const SIZES = [1_000, 10_000, 100_000];
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 100);
const TAIL_ENTRIES = 2000;
/** Entries after the checkpoint in the "with" conversations (10 turns). */
const AFTER_CHECKPOINT = 40;

const QUESTION =
  'Could you check why the nightly import job is slow again? It took 41 minutes yesterday, and the dashboard shows the Redis memory close to its limit.';
const ANSWER =
  'The import spends most of its time in the dedupe step: every row is checked with a separate round trip. Batching the checks in pipelines of 500 should bring it back under ten minutes. Memory is at 92 %, mostly old dedupe keys without a TTL; I can add a 24 h TTL to new ones.';

/** Turn `t` as its four entries (message, run.started, model.step, run.ended), JSON-encoded, starting at `seq`. */
function turn(t: number, seq: number): string[] {
  const run = `bench-run-${t}`;
  const entries: RecordEntry[] = [
    { v: 1, at: Date.now(), kind: 'message.received', updateKey: `bench:${t}`, sender: { id: 'u1', name: 'Ann' }, text: `${QUESTION} (#${t})` },
    { v: 1, at: Date.now(), kind: 'run.started', run, attempt: 1, token: 1, owner: 'bench', inputs: [seq] },
    {
      v: 1,
      at: Date.now(),
      kind: 'model.step',
      run,
      token: 1,
      step: 0,
      messages: [
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: `c${t}`, toolName: 'redis_info', input: { section: 'memory' } }] },
        {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: `c${t}`,
              toolName: 'redis_info',
              output: { type: 'json', value: { used_memory_human: '236M', maxmemory_human: '256M' } },
            },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: ANSWER }] },
      ],
      finishReason: 'stop',
      usage: { inputTokens: 2000, outputTokens: 90 },
    },
    { v: 1, at: Date.now(), kind: 'run.ended', run, attempt: 1, token: 1, outcome: 'completed' },
  ];
  return entries.map((e) => JSON.stringify(e));
}

async function buildRecord(client: Redis, prefix: string, conversationId: string, entries: number): Promise<void> {
  const k = conversationKeys(prefix, conversationId);
  let seq = 1;
  for (let t = 0; seq <= entries; ) {
    const p = client.pipeline();
    for (let n = 0; n < 250 && seq <= entries; n++, t++) {
      for (const json of turn(t, seq)) p.xadd(k.log, `${seq++}-0`, 'e', json);
    }
    await p.exec();
  }
  await client.hset(k.meta, 'seq', seq - 1);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function assemblyTimes(client: Redis, prefix: string): Promise<void> {
  const logger = pino({ level: 'silent' });
  const cases: Array<{ size: number; checkpoint: boolean; id: string }> = [];
  for (const size of SIZES) {
    for (const checkpoint of [true, false]) {
      const id = `bench:${size}:${checkpoint ? 'with' : 'without'}`;
      await buildRecord(client, prefix, id, size);
      if (checkpoint) {
        const cp: Checkpoint = {
          schema_version: 1,
          conversation_id: id,
          summary: `Ann has asked about the slow nightly import ${size / 4 - 10} times; the answer each time: batch the dedupe checks, add TTLs to dedupe keys.`,
          covers_until: size - AFTER_CHECKPOINT,
          tokens_before: 100_000,
          tokens_after: 3_000,
          created_at: Date.now(),
          summarizer: 'llm',
        };
        await client.hset(conversationKeys(prefix, id).state, CHECKPOINT_KEY, JSON.stringify(cp));
      }
      cases.push({ size, checkpoint, id });
    }
  }
  const times = new Map<string, number[]>(cases.map((c) => [c.id, []]));
  const read = new Map<string, number>();
  const load = (id: string) => loadPrompt({ client, prefix, conversationId: id, tailEntries: TAIL_ENTRIES, logger });
  for (const c of cases) for (let i = 0; i < 3; i++) await load(c.id); // warm-up
  // Interleaved, so drift on a shared machine hits every case alike.
  for (let i = 0; i < ITERATIONS; i++) {
    for (const c of cases) {
      const t0 = performance.now();
      const loaded = await load(c.id);
      times.get(c.id)!.push(performance.now() - t0);
      read.set(c.id, loaded.entriesRead);
    }
  }
  // Redis commands one assembly sends (pipelined commands count one each; commands sent together overlap in one round trip).
  const sent = countSent(client);
  const commands = new Map<string, number>();
  for (const c of cases) {
    const before = sent.count();
    await load(c.id);
    commands.set(c.id, sent.count() - before);
  }
  console.log(`prompt assembly (loadPrompt), median of ${ITERATIONS}, tail fallback ${TAIL_ENTRIES} entries:`);
  console.log('  record entries | checkpoint | entries read | commands | median ms');
  for (const c of cases) {
    console.log(
      `  ${String(c.size).padStart(14)} | ${(c.checkpoint ? 'valid' : 'none').padEnd(10)} | ${String(read.get(c.id)).padStart(12)} | ${String(commands.get(c.id)).padStart(8)} | ${median(times.get(c.id)!).toFixed(2).padStart(9)}`,
    );
  }
  for (const checkpoint of [true, false]) {
    const small = median(times.get(`bench:${SIZES[0]}:${checkpoint ? 'with' : 'without'}`)!);
    const large = median(times.get(`bench:${SIZES.at(-1)}:${checkpoint ? 'with' : 'without'}`)!);
    const target = checkpoint ? '   (target <= 1.5)' : '   (bounded tail: 1k reads 1000 entries, 100k reads 2000)';
    console.log(`  ratio 100k / 1k ${checkpoint ? 'with a checkpoint:   ' : 'without a checkpoint:'} ${(large / small).toFixed(2)}${target}`);
  }
}

/** 100 short runs in one conversation through the protocol, compacting under pressure. */
async function consecutiveRuns(client: Redis, prefix: string): Promise<void> {
  const RUNS = 100;
  const CONTEXT_WINDOW = 4000;
  const THRESHOLD = 0.8;
  const SYSTEM_TOKENS = 150;
  const PROVIDER_RATIO = 1.15; // the simulated provider counts 15 % more tokens than the estimator
  const conversationId = 'bench:runs';
  const logger = pino({ level: 'silent' });
  const options = { client, prefix };
  const dispatch = new Dispatch(options);
  const runs = new Runs(options);
  const state = new ConversationState(options);
  const calibrator = new Calibrator();
  const summarizer = new MockLanguageModelV4({
    doGenerate: async () => ({
      content: [
        {
          type: 'text',
          text: 'Ann is tuning the nightly import: batch the dedupe checks (pipelines of 500) and add a 24 h TTL to dedupe keys. Memory is at 92 %.',
        },
      ],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } },
      warnings: [],
    }),
  });
  let crossings = 0;
  let compactions = 0;
  let conflicts = 0;
  const chinese = '夜间导入任务又变慢了，昨天用了四十一分钟，缓存服务器的内存也快满了，能帮我看看原因吗？';
  for (let i = 0; i < RUNS; i++) {
    const ingest = await dispatch.ingest({
      conversationId,
      updateKey: `bench:msg:${i}`,
      sender: { id: 'u1', name: 'Ann' },
      text: i % 3 === 2 ? chinese : `${QUESTION} (#${i})`,
    });
    if (ingest.kind !== 'new-run') throw new Error(`expected a new run, got ${ingest.kind}`);
    const acquired = await runs.acquire(conversationId, ingest.runId, 'bench');
    const run = { conversationId, runId: acquired.runId, token: acquired.token };
    const loaded = await loadPrompt({ client, prefix, conversationId, logger });
    const check = await compactIfNeeded({
      run,
      state,
      loaded,
      trigger: 'pressure',
      contextWindow: CONTEXT_WINDOW,
      threshold: THRESHOLD,
      model: summarizer,
      calibrator,
      overheadTokens: SYSTEM_TOKENS,
      logger,
    });
    if (check.estimate.tokens > THRESHOLD * CONTEXT_WINDOW) crossings++;
    if (check.result?.kind === 'compacted') compactions++;
    if (check.result?.kind === 'conflict') conflicts++;
    // The simulated provider answers; its usage is what the next run's estimate starts from.
    const estimated = estimateMessages(check.messages) + SYSTEM_TOKENS;
    const inputTokens = Math.ceil(estimated * PROVIDER_RATIO);
    calibrator.observe(conversationId, inputTokens, estimated);
    const answer: ModelMessage = { role: 'assistant', content: [{ type: 'text', text: `${ANSWER} (#${i})` }] };
    await runs.append(run, {
      v: 1,
      kind: 'model.step',
      at: Date.now(),
      run: run.runId,
      token: run.token,
      step: 0,
      messages: [answer as { role: 'assistant'; content: unknown }],
      finishReason: 'stop',
      usage: { inputTokens, outputTokens: estimateTokens(ANSWER) },
    });
    await runs.finish(run, 'completed');
  }
  const calls = summarizer.doGenerateCalls.length;
  console.log(
    `\n${RUNS} consecutive short runs in one conversation (pressure trigger, window ${CONTEXT_WINDOW} tokens, threshold ${THRESHOLD}, simulated provider ratio ${PROVIDER_RATIO}):`,
  );
  console.log(`  threshold crossings (estimate > ${THRESHOLD * CONTEXT_WINDOW}): ${crossings}`);
  console.log(`  summarizer calls:                          ${calls}   (target: = crossings)`);
  console.log(`  compactions written: ${compactions}, CAS conflicts: ${conflicts}, learned ratio: ${calibrator.ratio(conversationId).toFixed(3)}`);
}

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  console.log(`resume benchmark${redis.shared ? ' (SHARED redis: timings include other clients)' : ' (private redis-server)'}`);
  try {
    await assemblyTimes(client, prefix);
    await consecutiveRuns(client, prefix);
  } finally {
    if (redis.shared) {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await client.unlink(...keys);
      } while (cursor !== '0');
    }
    await client.quit();
    await redis.stop();
  }
}
