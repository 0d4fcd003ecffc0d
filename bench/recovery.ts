/**
 * Recovery after a runner crash, bounded by the run lease: two runner
 * processes (`test/fixtures/recording-runner.ts`: the real runner, BullMQ
 * timings derived from the lease) on a private redis-server; 20 times, a
 * message starts a run, and the runner holding it is killed (`kill -9`)
 * while its model call is in flight; the survivor takes the run over and
 * answers. A fresh runner replaces the dead one before the next message.
 *
 * Prints kill-to-reply and kill-to-reacquire times (p50, max), the ratio
 * max / lease (target <= 1 + 2 s / lease), and checks that every message
 * was answered exactly once (sends counted at the outbound, unfiltered).
 *
 * Env: BENCH_KILLS (default 20), BENCH_LEASE_MS (default 3000; heartbeat a third of it).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { IngestService } from '../host/ingest.js';
import { Dispatch } from '../src/protocol/index.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import { readRange } from '../src/record/read.js';
import { conversationKeys } from '../src/redis/keys.js';
import { type RunnerProcess, type RunnerProcessSettings, recordedSends, startRunnerProcess } from '../test/fixtures/runner-processes.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { queueNameFor } from '../testing/runner-context.js';
import { dropRunKeys, privateRedis } from './private-redis.js';

const KILLS = Number(process.env.BENCH_KILLS ?? 20);
const LEASE_MS = Number(process.env.BENCH_LEASE_MS ?? 3000);
const HEARTBEAT_MS = Math.floor(LEASE_MS / 3);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(5);
  }
}

const userText = (body: { messages: Array<{ role: string; content: unknown }> }) =>
  body.messages
    .filter((m) => m.role === 'user')
    .map((m) => String(m.content))
    .at(-1) ?? '';

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const queueConn = new Redis(redis.url, { maxRetriesPerRequest: null });
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const fake = await startFakeOpenAI();
  // The first call for a question hangs until its runner dies; the retried call answers.
  const asked = new Set<string>();
  fake.script((req) => {
    const q = userText(req);
    if (asked.has(q)) return { text: `answer to ${q}` };
    asked.add(q);
    return { text: 'never sent', delayMs: 600_000 };
  });
  const dispatch = new Dispatch({ client, prefix, leaseMs: LEASE_MS });
  const queue = new RunQueue({ connection: queueConn, name: queueNameFor(prefix), bullPrefix: bullPrefixFor(prefix) });
  const ingest = new IngestService(dispatch, queue);
  const settings: RunnerProcessSettings = { redisUrl: redis.url, prefix, leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS, modelUrl: fake.url };
  console.log(
    `recovery benchmark${redis.shared ? ' (SHARED redis)' : ' (private redis-server)'}: lease ${LEASE_MS} ms, heartbeat ${HEARTBEAT_MS} ms, ${KILLS} kills`,
  );

  let runners: RunnerProcess[] = await Promise.all([startRunnerProcess(settings), startRunnerProcess(settings)]);
  const toReply: number[] = [];
  const toAcquire: number[] = [];
  const conversations: string[] = [];
  try {
    for (let i = 0; i < KILLS; i++) {
      const conversationId = `telegram:bench-${i}`;
      const text = `question ${i}`;
      conversations.push(conversationId);
      const requestsBefore = fake.requests.length;
      const r = await ingest.ingest({ conversationId, updateKey: `bench:${i}`, sender: { id: 'u1' }, text });
      if (r.kind !== 'new-run') throw new Error(`expected a new run, got ${r.kind}`);
      await until(async () => (fake.requests.slice(requestsBefore).some((q) => userText(q.body) === text) ? true : undefined), 30_000, 'model call');
      const owner = (await dispatch.status(conversationId)).owner;
      const holder = runners.find((p) => p.owner === owner);
      if (!holder) throw new Error(`run held by ${owner}, not one of the runner processes`);

      const killedAt = Date.now();
      await holder.kill9();
      const reply = await until(async () => (await recordedSends(client, prefix)).find((s) => s.conversationId === conversationId), 120_000, `reply ${i}`);
      toReply.push(reply.at - killedAt);
      const started = (await readRange(client, conversationKeys(prefix, conversationId).log)).filter((e) => e.kind === 'run.started');
      const retaken = started.find((e) => e.kind === 'run.started' && e.attempt === 2);
      if (retaken) toAcquire.push(retaken.at - killedAt);
      process.stdout.write(`  kill ${String(i + 1).padStart(2)}: reply after ${reply.at - killedAt} ms\n`);
      // Two runners again before the next message.
      runners = [...runners.filter((p) => p !== holder), await startRunnerProcess(settings)];
    }
    // Late duplicates would come within a lease or two of the last takeover.
    await sleep(LEASE_MS * 2 + 2000);
    const sends = await recordedSends(client, prefix);
    let exact = 0;
    const problems: string[] = [];
    for (const [i, cid] of conversations.entries()) {
      const mine = sends.filter((s) => s.conversationId === cid);
      if (mine.length === 1 && mine[0]!.text === `answer to question ${i}`) exact++;
      else problems.push(`${cid}: ${JSON.stringify(mine.map((s) => s.text))}`);
    }
    const p50 = quantile(toReply, 0.5);
    const max = Math.max(...toReply);
    console.log(`\nkill -> re-acquired by the survivor: p50 ${quantile(toAcquire, 0.5)} ms, max ${Math.max(...toAcquire)} ms`);
    console.log(`kill -> reply delivered:            p50 ${p50} ms, max ${max} ms`);
    console.log(`ratio max / lease: ${(max / LEASE_MS).toFixed(2)}   (target <= ${(1 + 2000 / LEASE_MS).toFixed(2)} = 1 + 2 s / lease)`);
    console.log(`answered exactly once: ${exact} / ${conversations.length}${problems.length ? `\n  ${problems.join('\n  ')}` : ''}`);
    console.log(`sends in total: ${sends.length} (expected ${conversations.length})`);
  } finally {
    await Promise.all(runners.map((p) => p.kill9()));
    await queue.queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    queueConn.disconnect();
    await dropRunKeys(client, redis.shared, [`${prefix}:*`, `${bullPrefixFor(prefix)}:*`]);
    await client.quit();
    await fake.close();
    await redis.stop();
  }
}
