import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ReconcileReport, reconcileOnce, startReconciler } from '../../host/reconciler.js';
import { ConfigError } from '../../src/errors.js';
import { Dispatch, Runs } from '../../src/protocol/index.js';
import { bullPrefixFor, RunQueue } from '../../src/protocol/run-queue.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

let redis: Redis;
let queueConn: Redis;
let prefix: string;
let queue: RunQueue;
let dispatch: Dispatch;
let runs: Runs;

beforeEach(() => {
  redis = new Redis(redisUrl());
  queueConn = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  prefix = testPrefix();
  queue = new RunQueue({ connection: queueConn, name: `reconcile-${prefix}`, bullPrefix: bullPrefixFor(prefix) });
  dispatch = new Dispatch({ client: redis, prefix });
  runs = new Runs({ client: redis, prefix });
});

afterEach(async () => {
  await queue.queue.obliterate({ force: true });
  await queue.close();
  await cleanupPrefix(redis, prefix);
  queueConn.disconnect();
  await redis.quit();
});

const message = (conversationId: string, n: number) => ({ conversationId, updateKey: `${conversationId}:${n}`, sender: { id: 'u1' }, text: `hello ${n}` });

async function newRun(conversationId: string): Promise<string> {
  const r = await dispatch.ingest(message(conversationId, 1));
  if (r.kind !== 'new-run') throw new Error(`expected a new run, got ${r.kind}`);
  return r.runId;
}

describe('reconcileOnce', () => {
  describe('when a run was left queued without a job (the host died before enqueueing)', () => {
    it('enqueues its job once; a second pass leaves the live job alone', async () => {
      const runId = await newRun('telegram:1');
      expect(await queue.queue.getJob(runId)).toBeUndefined();

      expect(await reconcileOnce({ client: redis, prefix, queue })).toEqual({ scanned: 1, requeued: 1, expired: 0 });
      const job = await queue.queue.getJob(runId);
      expect(job?.data).toEqual({ conversationId: 'telegram:1', runId });
      expect(await job?.getState()).toBe('waiting');

      expect(await reconcileOnce({ client: redis, prefix, queue })).toEqual({ scanned: 1, requeued: 0, expired: 0 });
    });

    it('re-adds a job that already finished while its run is still queued', async () => {
      const runId = await newRun('telegram:1');
      await queue.enqueue('telegram:1', runId);
      const job = (await queue.queue.getJob(runId))!;
      await job.remove();
      expect(await reconcileOnce({ client: redis, prefix, queue })).toMatchObject({ requeued: 1 });
      expect(await (await queue.queue.getJob(runId))?.getState()).toBe('waiting');
    });
  });

  describe('when a running run lost its worker and its job', () => {
    it('re-enqueues it once the lease has expired, and not before', async () => {
      const runId = await newRun('telegram:1');
      await runs.acquire('telegram:1', runId, 'dead-worker', 60_000);
      expect(await reconcileOnce({ client: redis, prefix, queue })).toEqual({ scanned: 1, requeued: 0, expired: 0 });
      expect(await queue.queue.getJob(runId)).toBeUndefined();

      // The worker's lease runs out (set it in the past on the run record, as a dead worker leaves it).
      await redis.hset(`${prefix}:{c:telegram:1}:run:${runId}`, 'lease_until', 1);
      expect(await reconcileOnce({ client: redis, prefix, queue })).toEqual({ scanned: 1, requeued: 0, expired: 1 });
      expect(await (await queue.queue.getJob(runId))?.getState()).toBe('waiting');
      // The new worker can take it over with a higher fencing token.
      const taken = await runs.acquire('telegram:1', runId, 'new-worker');
      expect(taken).toMatchObject({ token: 2, attempt: 2 });
    });
  });

  it('finds every active run across many SCAN pages and ignores idle conversations', async () => {
    const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => newRun(`webhook:crm:${i}`)));
    // An idle conversation: its run ended, no active key.
    const idle = await newRun('telegram:idle');
    const run = await runs.acquire('telegram:idle', idle, 'w1');
    await runs.finish(run, 'completed');

    const report = await reconcileOnce({ client: redis, prefix, queue, scanCount: 7 });
    expect(report).toEqual({ scanned: 60, requeued: 60, expired: 0 });
    const jobs = await Promise.all(ids.map((id) => queue.queue.getJob(id)));
    expect(jobs.every((j) => j !== undefined)).toBe(true);
    expect(await queue.queue.getJob(idle)).toBeUndefined();
  });

  it('refuses a queue of another prefix, and writes nothing', async () => {
    await newRun('telegram:1');
    const foreign = new RunQueue({ connection: queueConn, name: `reconcile-${prefix}`, bullPrefix: bullPrefixFor(`${prefix}x`) });
    try {
      await expect(reconcileOnce({ client: redis, prefix, queue: foreign })).rejects.toBeInstanceOf(ConfigError);
      expect(() => startReconciler({ client: redis, prefix, queue: foreign, intervalMs: 60_000 })).toThrow(ConfigError);
      expect(await foreign.queue.getJobCounts('waiting')).toEqual({ waiting: 0 });
    } finally {
      await foreign.close();
    }
  });
});

describe('startReconciler', () => {
  it('passes again at once when the client reconnects, not at the next interval', async () => {
    const client = new Redis(redisUrl());
    await new Promise((resolve) => client.once('ready', resolve));
    const reports: ReconcileReport[] = [];
    const reconciler = startReconciler({ client, prefix, queue, intervalMs: 3_600_000, onPass: (r) => reports.push(r) });
    try {
      // The pass at start found nothing; a run then loses its job (the host died before enqueueing).
      await waitFor(() => reports.length > 0, 5000, 'first pass');
      expect(reports[0]).toEqual({ scanned: 0, requeued: 0, expired: 0 });
      const runId = await newRun('telegram:1');
      expect(await queue.queue.getJob(runId)).toBeUndefined();
      // The connection drops and comes back (as after a Redis restart): the reconnect triggers a pass.
      client.disconnect(true);
      // The pass reports after it enqueued: wait for its report, not for the job.
      await waitFor(() => reports.length > 1, 10_000, 'a pass after the reconnect');
      expect(reports[1]).toEqual({ scanned: 1, requeued: 1, expired: 0 });
      expect(await queue.queue.getJob(runId)).toBeDefined();
    } finally {
      await reconciler.stop();
      client.disconnect();
    }
  });
});
