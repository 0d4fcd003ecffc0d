/**
 * The BullMQ worker that executes runs. A job only names a run; the run's
 * state lives in Redis. A run whose lease is held elsewhere is delayed until
 * the lease expires; an ended or missing run completes the job as a no-op.
 *
 * BullMQ's job lock and stalled check are derived from the run lease, so a
 * run whose runner died is redelivered within about `leaseMs` plus one
 * stalled-check interval (see `bullTimingsForLease`), not after BullMQ's
 * fixed 30 s lock.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type ConnectionOptions, DelayedError, type Job, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { DEFAULTS } from '../src/config/defaults.js';
import { LeaseHeldError, RunEndedError, RunNotFoundError } from '../src/errors.js';
import { logQueueError, type RunJobData } from '../src/protocol/run-queue.js';
import type { ExecutionResult, RunExecutor } from './run/executor.js';

/** Options of the run worker. */
export interface RunWorkerOptions {
  executor: RunExecutor;
  /** BullMQ connection for the worker (needs `maxRetriesPerRequest: null`). */
  connection: ConnectionOptions;
  /** Queue name. Default `steerbot-runs`. */
  queueName?: string;
  /** BullMQ key prefix: `bullPrefixFor(redis.prefix)` (src/protocol/run-queue.ts). Required: the queue is per deployment. */
  bullPrefix: string;
  /** The run lease (`runs.leaseMs`), in ms: BullMQ's lock and stalled check derive from it. */
  leaseMs: number;
  /** Runs executed at once by this process. Default 4. */
  concurrency?: number;
  /** BullMQ job lock, in ms (a dead worker's job is redelivered after it). Default: `leaseMs`. */
  lockDurationMs?: number;
  /** How often BullMQ checks for stalled jobs, in ms. Default: from `leaseMs` (`bullTimingsForLease`). */
  stalledIntervalMs?: number;
  logger: Logger;
}

/** BullMQ timings derived from a run lease, in ms. */
export interface BullTimings {
  /** Job lock: `leaseMs`, so a dead worker's lock lapses when its run lease does. */
  lockDuration: number;
  /**
   * Stalled check: a quarter of the lease, between 250 ms and 1 s. One check
   * runs per interval across all workers of a queue (BullMQ guards it with a
   * key), so a short interval costs one small script per interval.
   */
  stalledInterval: number;
}

/**
 * BullMQ's lock and stalled-check timings for a run lease. A job whose worker
 * died is moved back to wait at most `lockDuration + stalledInterval` after
 * the worker's last lock renewal; the worker that picks it up acquires the run
 * once its lease has expired (delaying the job until then if needed). So a
 * dead runner's run is taken over within `leaseMs + stalledInterval` plus
 * pickup, whatever the lease.
 */
export function bullTimingsForLease(leaseMs: number): BullTimings {
  return { lockDuration: leaseMs, stalledInterval: Math.min(1000, Math.max(250, Math.floor(leaseMs / 4))) };
}

/** A fresh worker identity: host, pid and a random suffix. */
export function workerIdentity(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

/** Executes runs from the queue. */
export class RunWorker {
  readonly worker: Worker<RunJobData, string>;

  constructor(private readonly o: RunWorkerOptions) {
    const timings = bullTimingsForLease(o.leaseMs);
    this.worker = new Worker<RunJobData, string>(o.queueName ?? DEFAULTS.runs.queueName, (job, token) => this.process(job, token), {
      connection: o.connection,
      prefix: o.bullPrefix,
      concurrency: o.concurrency ?? 4,
      lockDuration: o.lockDurationMs ?? timings.lockDuration,
      stalledInterval: o.stalledIntervalMs ?? timings.stalledInterval,
      // A run can be redelivered many times (crashes, takeovers); the fencing token keeps that safe.
      maxStalledCount: 1000,
    });
    // Connection errors (a Redis restart: one per reconnect attempt, on two connections) are the
    // process's connection watcher's to report once; anything else is worth a warning.
    this.worker.on('error', (err) => logQueueError(o.logger, err, 'run worker error'));
  }

  private async process(job: Job<RunJobData, string>, token?: string): Promise<string> {
    const { conversationId, runId } = job.data;
    let result: ExecutionResult;
    try {
      result = await this.o.executor.execute(conversationId, runId);
    } catch (err) {
      if (err instanceof LeaseHeldError) {
        // Another worker holds a live lease (or held it and died): try again once it expires.
        await job.moveToDelayed(err.leaseUntilMs + 50, token);
        throw new DelayedError();
      }
      if (err instanceof RunEndedError || err instanceof RunNotFoundError) return 'skipped';
      throw err;
    }
    if (result.kind === 'aborted') {
      // Shutdown: leave the run for another worker once our lease runs out.
      await job.moveToDelayed(Date.now() + 1000, token);
      throw new DelayedError();
    }
    return result.kind === 'finished' ? result.outcome : result.kind;
  }

  /**
   * Graceful shutdown: stop taking runs, give active runs `graceMs` to end,
   * then abort the rest (they stay recoverable). Returns how many were aborted.
   */
  async close(graceMs: number): Promise<{ abortedInFlight: number }> {
    const closing = this.worker.close();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      closing.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), graceMs);
      }),
    ]);
    clearTimeout(timer);
    let abortedInFlight = 0;
    if (timedOut) {
      abortedInFlight = this.o.executor.abortAll();
      this.o.logger.warn({ abortedInFlight }, 'grace period over; aborted runs in flight (recoverable from Redis)');
      await closing;
    }
    return { abortedInFlight };
  }
}
