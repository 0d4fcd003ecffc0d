/**
 * Steering cost and latency, measured in one run on a private redis-server:
 *
 * (a) one `Runs.pull` at a turn boundary when the steering list holds 0, 1
 *     and 5 messages: commands the client writes and script calls the server
 *     counts (INFO commandstats evalsha+eval delta) per pull, and mean time;
 * (b) the delay from `ingest` of a steering message to its appearance in a
 *     model request, through the whole stack (ingest → Redis → BullMQ →
 *     runner → local agent) with a mock model that takes a fixed time per
 *     tool-call step. Steering is taken at boundaries, not polled, so the
 *     worst delay should be about one step.
 *
 * Prints ratios; asserts nothing (the machine is shared and noisy).
 */

import { randomBytes } from 'node:crypto';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { Redis } from 'ioredis';
import { z } from 'zod';
import { readConfig } from '../app/config.js';
import { runnerFeatures } from '../app/features/index.js';
import { IngestService } from '../host/ingest.js';
import { createLocalAgentPlugin } from '../plugins/local-agent/index.js';
import { startRunner } from '../runner/main.js';
import type { AppContext } from '../src/app-context.js';
import { createLogger } from '../src/logger.js';
import { Dispatch, type RunRef, Runs } from '../src/protocol/index.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import { readRange } from '../src/record/read.js';
import { createRedis, redisFromConfig } from '../src/redis/connection.js';
import { conversationKeys } from '../src/redis/keys.js';
import { commandCalls, countSent, privateRedis } from './private-redis.js';

const PULLS = Number(process.env.BENCH_PULLS ?? 2000);
const STEP_MS = Number(process.env.BENCH_STEP_MS ?? 50);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 30);
// Steps before the first sample: the first model steps of a process are slow (JIT, schema compilation).
const WARMUP_STEPS = 3;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
let updates = 0;
const message = (conversationId: string, text: string) => ({ conversationId, updateKey: `bench:${++updates}`, sender: { id: 'u1' }, text });

interface PullStats {
  depth: number;
  clientCommands: number;
  scriptCalls: number;
  meanMs: number;
}

/** A run with `depth` messages put in its steering list (by another client) before each pull. */
interface PullTarget {
  depth: number;
  ref: RunRef;
  runs: Runs;
  client: Redis;
  sent: { count(): number };
}

/**
 * (a) Pulls with 0, 1 and 5 messages waiting. Round trips are counted in one
 * pass per depth (so the server's counters belong to that depth); times are
 * taken in a second pass that interleaves the depths, so drift on a noisy
 * machine hits them alike. Refills go through another client, outside both.
 */
async function measurePulls(url: string, prefix: string, depths: number[]): Promise<PullStats[]> {
  const feeder = new Redis(url);
  const admin = new Redis(url);
  const fed = countSent(feeder);
  const dispatch = new Dispatch({ client: feeder, prefix });
  const targets: PullTarget[] = [];
  for (const depth of depths) {
    const client = new Redis(url);
    const runs = new Runs({ client, prefix });
    const conversationId = `bench:pull-${depth}`;
    const first = await dispatch.ingest(message(conversationId, 'start'));
    if (first.kind !== 'new-run') throw new Error(`unexpected ${first.kind}`);
    const acquired = await runs.acquire(conversationId, first.runId, 'bench');
    targets.push({ depth, ref: { conversationId, runId: first.runId, token: acquired.token }, runs, client, sent: countSent(client) });
  }
  const pullOnce = async (t: PullTarget, label: string): Promise<number> => {
    for (let j = 0; j < t.depth; j++) await dispatch.ingest(message(t.ref.conversationId, `${label}.${j}`));
    const t0 = performance.now();
    const got = await t.runs.pull(t.ref);
    const ms = performance.now() - t0;
    if (got.length !== t.depth) throw new Error(`pulled ${got.length}, expected ${t.depth}`);
    return ms;
  };
  // Warm-up: loads the scripts (EVALSHA miss + EVAL) and lets the JIT settle.
  for (let i = 0; i < 200; i++) for (const t of targets) await pullOnce(t, `warm ${i}`);

  const counts = new Map<number, { clientCommands: number; scriptCalls: number }>();
  const countPulls = Math.min(PULLS, 500);
  for (const t of targets) {
    const sentBefore = t.sent.count();
    const fedBefore = fed.count();
    const before = await commandCalls(admin, ['evalsha', 'eval']);
    for (let i = 0; i < countPulls; i++) await pullOnce(t, `count ${i}`);
    const scriptCalls = (await commandCalls(admin, ['evalsha', 'eval'])) - before - (fed.count() - fedBefore);
    counts.set(t.depth, { clientCommands: (t.sent.count() - sentBefore) / countPulls, scriptCalls: scriptCalls / countPulls });
  }

  const totals = new Map<number, number>(depths.map((d) => [d, 0]));
  for (let i = 0; i < PULLS; i++) for (const t of targets) totals.set(t.depth, totals.get(t.depth)! + (await pullOnce(t, `time ${i}`)));

  await Promise.all([feeder.quit(), admin.quit(), ...targets.map((t) => t.client.quit())]);
  return depths.map((depth) => ({ depth, ...counts.get(depth)!, meanMs: totals.get(depth)! / PULLS }));
}

/** A mock model: each step takes STEP_MS and calls `noop` until `done()`, then answers. `onRequest` sees each request's user texts when it is made. */
function stepModel(onRequest: (userTexts: string[], atMs: number) => void, done: () => boolean): MockLanguageModelV4 {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  };
  let step = 0;
  return new MockLanguageModelV4({
    doStream: async ({ prompt }) => {
      const texts = prompt.flatMap((m) => (m.role === 'user' ? m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])) : []));
      onRequest(texts, performance.now());
      const finish = done();
      await sleep(STEP_MS);
      const start: LanguageModelV4StreamPart = { type: 'stream-start', warnings: [] };
      const parts: LanguageModelV4StreamPart[] = finish
        ? [
            start,
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: 'done' },
            { type: 'text-end', id: 't' },
            { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
          ]
        : [
            start,
            { type: 'tool-call', toolCallId: `c${step++}`, toolName: 'noop', input: '{}' },
            { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
          ];
      return { stream: convertArrayToReadableStream(parts) };
    },
  });
}

/** (b) ingest → model request delay over SAMPLES steering messages, through host + runner. */
async function measureDelay(url: string, prefix: string): Promise<{ delays: number[]; periods: number[] }> {
  const config = readConfig({ env: { REDIS_URL: url, STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `bench-${prefix}`, LOG_LEVEL: 'error' } });
  const logger = createLogger({ level: config.log.level });
  const redis = createRedis({ url });
  const ctx: AppContext = {
    config,
    logger,
    redisUrl: url,
    redisConnection: { url },
    redis,
    connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, url }),
  };
  const dispatch = new Dispatch({ client: redis, prefix });
  const queueConn = ctx.connectRedis({ forBullmq: true });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName, bullPrefix: bullPrefixFor(prefix) });
  const ingest = new IngestService(dispatch, queue);

  const seenAt = new Map<number, number>();
  const waiters = new Map<number, () => void>();
  const requestTimes: number[] = [];
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  let finished = false;
  const model = stepModel(
    (texts, at) => {
      if (requestTimes.length >= WARMUP_STEPS) markStarted();
      requestTimes.push(at);
      for (const t of texts) {
        const m = /^sample-(\d+)$/.exec(t);
        if (!m || seenAt.has(Number(m[1]))) continue;
        seenAt.set(Number(m[1]), at);
        waiters.get(Number(m[1]))?.();
      }
    },
    () => finished,
  );
  const noop = { name: 'noop', description: 'does nothing', inputSchema: z.object({}), execute: async () => ({ ok: true }) };
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({ model, tools: [noop], builtins: { currentTime: false }, maxSteps: 100_000 }),
    features: runnerFeatures(),
  });

  const conversationId = 'bench:latency';
  const first = await ingest.ingest(message(conversationId, 'start working'));
  if (first.kind !== 'new-run') throw new Error(`unexpected ${first.kind}`);
  await started;

  const delays: number[] = [];
  const sampledFrom = requestTimes.length;
  for (let i = 0; i < SAMPLES; i++) {
    await sleep(Math.random() * STEP_MS); // land anywhere within a step
    const seen = new Promise<void>((r) => waiters.set(i, r));
    const t0 = performance.now();
    const r = await ingest.ingest(message(conversationId, `sample-${i}`));
    if (r.kind !== 'steered') throw new Error(`sample ${i} was ${r.kind}, expected steered`);
    await seen;
    delays.push(seenAt.get(i)! - t0);
  }
  finished = true;
  // Request-to-request intervals while sampling: the step time plus the boundary's own work (record step, pull).
  const periods = requestTimes
    .slice(sampledFrom - 1)
    .map((t, j, a) => (j === 0 ? 0 : t - a[j - 1]!))
    .slice(1);
  const log = conversationKeys(prefix, conversationId).log;
  for (;;) {
    if ((await readRange(redis, log)).some((e) => e.kind === 'run.ended')) break;
    await sleep(10);
  }
  await runner.close(1000);
  await queue.queue.obliterate({ force: true });
  await queue.close();
  queueConn.disconnect();
  await redis.quit();
  return { delays, periods };
}

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  try {
    const stats = await measurePulls(redis.url, prefix, [0, 1, 5]);
    const empty = stats[0]!;
    console.log(`steering benchmark${redis.shared ? ' (SHARED redis: server counts may include other clients)' : ' (private redis-server)'}`);
    console.log(`(a) Runs.pull at a boundary: ${PULLS} timed pulls per depth (interleaved), ${Math.min(PULLS, 500)} counted`);
    console.log('    waiting  client cmds/pull  script calls/pull  mean ms/pull  time vs empty');
    for (const s of stats) {
      console.log(
        `    ${String(s.depth).padStart(7)}  ${s.clientCommands.toFixed(3).padStart(16)}  ${s.scriptCalls.toFixed(3).padStart(17)}  ${s.meanMs.toFixed(4).padStart(12)}  ${(s.meanMs / empty.meanMs).toFixed(2).padStart(13)}`,
      );
    }

    const { delays, periods } = await measureDelay(redis.url, prefix);
    const avg = mean(delays);
    const max = Math.max(...delays);
    console.log(`(b) ingest → model request, ${delays.length} steering messages, mock model ${STEP_MS} ms per tool-call step`);
    console.log(`    observed step period:     mean ${mean(periods).toFixed(1)} ms, max ${Math.max(...periods).toFixed(1)} ms (step + boundary work)`);
    console.log(`    delay:                    mean ${avg.toFixed(1)} ms, max ${max.toFixed(1)} ms (each sample lands at a random point of a step)`);
    console.log(`    ratio max delay / step:   ${(max / STEP_MS).toFixed(2)}   (<= ~1: bounded by the step time, not by polling)`);
    console.log(`    ratio max delay / period: ${(max / Math.max(...periods)).toFixed(2)}   (<= 1 when every message made the next boundary)`);
  } finally {
    await redis.stop();
  }
}
