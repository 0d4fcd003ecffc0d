/**
 * Schedule fires at burst: 1000 one-shot schedules due in the same second,
 * over 500 conversations (two each), served by two runner processes
 * (`test/fixtures/recording-runner.ts`: the real runner with its fire worker,
 * the local agent against an instant fake model) on a private redis-server.
 *
 * Prints the fire lag (scheduled time -> the model request that carries the
 * fire) p50 / p99 / max, and checks that every fire became exactly one input
 * and that no conversation ever had two runs active at once (from the
 * record's `run.started` / `run.ended` entries).
 *
 * Env: BENCH_SCHEDULES (default 1000), BENCH_CONVERSATIONS (default 500), BENCH_LEAD_MS (time to create them all, default 20 000).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { bullPrefixFor } from '../src/protocol/run-queue.js';
import { readRange } from '../src/record/read.js';
import { conversationKeys } from '../src/redis/keys.js';
import { Schedules } from '../src/schedules/schedules.js';
import { type RunnerProcess, type RunnerProcessSettings, recordedSends, startRunnerProcess } from '../test/fixtures/runner-processes.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { dropRunKeys, privateRedis } from './private-redis.js';

const SCHEDULES = Number(process.env.BENCH_SCHEDULES ?? 1000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 500);
const LEAD_MS = Number(process.env.BENCH_LEAD_MS ?? 20_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const FIRE_RE = /fire-(\d+)/g;

/** Runs a list of tasks, `limit` at a time. */
async function limited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const fake = await startFakeOpenAI();
  // The first request that carries a fire: when the model was asked about it.
  const askedAt = new Map<number, number>();
  fake.script((req: { messages: Array<{ role: string; content: unknown }> }) => {
    const now = Date.now();
    for (const m of req.messages) {
      if (m.role !== 'user') continue;
      for (const match of JSON.stringify(m.content).matchAll(FIRE_RE)) {
        const n = Number(match[1]);
        if (!askedAt.has(n)) askedAt.set(n, now);
      }
    }
    return { text: 'noted' };
  });
  const settings: RunnerProcessSettings = {
    redisUrl: redis.url,
    prefix,
    leaseMs: 10_000,
    heartbeatMs: 3000,
    modelUrl: fake.url,
    env: { STEERBOT_RUNNER_CONCURRENCY: '16' },
    // Two processes compiling TypeScript on a loaded machine start slowly.
    readyTimeoutMs: 180_000,
  };
  const runners: RunnerProcess[] = await Promise.all([startRunnerProcess(settings), startRunnerProcess(settings)]);
  const scheduleConn = new Redis(redis.url, { maxRetriesPerRequest: null });
  const schedules = new Schedules({
    client,
    prefix,
    connection: scheduleConn,
    bullPrefix: bullPrefixFor(prefix),
  });
  console.log(
    `schedule benchmark${redis.shared ? ' (SHARED redis)' : ' (private redis-server)'}: ${SCHEDULES} one-shots due in one second over ${CONVERSATIONS} conversations, 2 runner processes (runner concurrency 16, fire concurrency 16 each), instant fake model`,
  );
  try {
    const dueAt = Math.ceil((Date.now() + LEAD_MS) / 1000) * 1000;
    const at = new Date(dueAt).toISOString();
    const created = Date.now();
    await limited(
      Array.from({ length: SCHEDULES }, (_, i) => i),
      32,
      async (i) => {
        await schedules.create(`telegram:sched-${i % CONVERSATIONS}`, { at, prompt: `fire-${i}` }, { createdBy: 'bench' });
      },
    );
    const createdIn = Date.now() - created;
    if (Date.now() >= dueAt) console.log(`WARNING: creating took ${createdIn} ms, past the due time; raise BENCH_LEAD_MS`);
    console.log(`created ${SCHEDULES} schedules in ${createdIn} ms; due at ${at}`);

    const deadline = dueAt + 120_000;
    while (askedAt.size < SCHEDULES && Date.now() < deadline) await sleep(50);
    // Let late duplicates show, then read the answers' settling.
    await sleep(3000);
    const lags = [...askedAt.values()].map((t) => t - dueAt);

    const ingestLags: number[] = [];
    let inputsOk = 0;
    let overlapping = 0;
    const problems: string[] = [];
    for (let c = 0; c < CONVERSATIONS; c++) {
      const cid = `telegram:sched-${c}`;
      const entries = await readRange(client, conversationKeys(prefix, cid).log);
      const fires = entries.flatMap((e) => (e.kind === 'message.received' && e.origin?.kind === 'schedule' ? [e.text] : []));
      for (const e of entries) if (e.kind === 'message.received' && e.origin?.kind === 'schedule') ingestLags.push(e.at - dueAt);
      const expected = Array.from({ length: SCHEDULES }, (_, i) => i)
        .filter((i) => i % CONVERSATIONS === c)
        .map((i) => `fire-${i}`);
      if (fires.length === expected.length && expected.every((t) => fires.includes(t))) inputsOk++;
      else problems.push(`${cid}: ${JSON.stringify(fires)}`);
      let active = 0;
      for (const e of entries) {
        if (e.kind === 'run.started' && e.attempt === 1) active++;
        if (e.kind === 'run.ended') active--;
        if (active > 1) {
          overlapping++;
          break;
        }
      }
    }
    const sends = await recordedSends(client, prefix);
    console.log(
      `\nfire lag (scheduled time -> input recorded): p50 ${quantile(ingestLags, 0.5)} ms, p99 ${quantile(ingestLags, 0.99)} ms, max ${Math.max(...ingestLags)} ms`,
    );
    console.log(`fire lag (scheduled time -> model request): p50 ${quantile(lags, 0.5)} ms, p99 ${quantile(lags, 0.99)} ms, max ${Math.max(...lags)} ms`);
    console.log(`fires that reached the model: ${askedAt.size} / ${SCHEDULES}`);
    console.log(
      `conversations whose fires became exactly one input each: ${inputsOk} / ${CONVERSATIONS}${problems.length ? `\n  ${problems.slice(0, 10).join('\n  ')}` : ''}`,
    );
    console.log(`conversations that ever had two runs active at once: ${overlapping}`);
    console.log(`answers sent: ${sends.length} (runs: a conversation's two fires share a run when the second joins the first while it is queued)`);
  } finally {
    await Promise.all(runners.map((p) => p.kill9()));
    await schedules.queue.obliterate({ force: true }).catch(() => undefined);
    await schedules.close();
    scheduleConn.disconnect();
    await dropRunKeys(client, redis.shared, [`${prefix}:*`, `${bullPrefixFor(prefix)}:*`]);
    await client.quit();
    await fake.close();
    await redis.stop();
  }
}
