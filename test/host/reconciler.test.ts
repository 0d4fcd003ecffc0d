import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { reconcileOnce } from '../../host/reconciler.js';
import { Dispatch, Runs } from '../../src/protocol/index.js';
import { RunQueue } from '../../src/run-queue.js';
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
  queue = new RunQueue({ connection: queueConn, name: `reconcile-${prefix}` });
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
});
