/**
 * Runs as BullMQ jobs: one job per run, `jobId = run id`, so enqueueing the
 * same run twice is a no-op. The job only names the run; Redis holds its state.
 */

import { type ConnectionOptions, type Job, type JobType, Queue } from 'bullmq';
import { DEFAULTS } from '../config/defaults.js';
import type { Logger } from '../logger.js';
import { isRedisUnavailable } from '../redis/connection.js';
import { assertRunId } from '../redis/keys.js';
import { metrics } from '../telemetry/metrics.js';

/** What a run job carries. */
export interface RunJobData {
  conversationId: string;
  runId: string;
}

/** Options of the run queue. */
export interface RunQueueOptions {
  /** BullMQ connection (an ioredis client or options). */
  connection: ConnectionOptions;
  /** Queue name. Default `steerbot-runs`. */
  name?: string;
  /**
   * BullMQ key prefix: `bullPrefixFor(redis.prefix)`. Required, so two
   * deployments on one Redis with different key prefixes never share a queue.
   */
  bullPrefix: string;
  /**
   * Where the queue's errors go: connection errors at debug (the process
   * reports an outage once, see `watchRedis`), others at error. Default: dropped.
   */
  logger?: Logger;
}

/**
 * The BullMQ key prefix of a steerbot key prefix: `{<prefix>-bull}`, a hash
 * tag, so the whole queue is in one Cluster slot as BullMQ requires
 * (`{sb-bull}` for the default prefix `sb`).
 */
export function bullPrefixFor(prefix: string): string {
  return `{${prefix}-bull}`;
}

/** Entries of BullMQ's event stream of the run queue (approximate). */
const RUN_EVENTS_MAX_LEN = 1000;

/** Job states in which a run's job will still be processed without help. */
const LIVE_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children']);

/** The BullMQ queue of runs. */
export class RunQueue {
  readonly queue: Queue<RunJobData>;
  /** The BullMQ key prefix the queue lives under. */
  readonly bullPrefix: string;

  constructor(opts: RunQueueOptions) {
    this.bullPrefix = opts.bullPrefix;
    this.queue = new Queue<RunJobData>(opts.name ?? DEFAULTS.runs.queueName, {
      connection: opts.connection,
      prefix: opts.bullPrefix,
      // Nothing in steerbot reads BullMQ's event stream; keep the recent events a dashboard shows, not 10 000.
      streams: { events: { maxLen: RUN_EVENTS_MAX_LEN } },
    });
    // Without a listener BullMQ prints every connection error to stderr, outside the logger and its redaction.
    this.queue.on('error', (err) => logQueueError(opts.logger, err, 'run queue error'));
    // `steerbot_queue_jobs` reads the counts at scrape time: a few O(1) reads, no scan.
    this.unwatch = metrics.watchQueue(this.queue.name, (states) => this.queue.getJobCounts(...(states as JobType[])));
  }

  private readonly unwatch: () => void;

  /** Enqueues the run's job (idempotent while the job exists). */
  async enqueue(conversationId: string, runId: string): Promise<void> {
    assertRunId(runId);
    await this.queue.add(
      'run',
      { conversationId, runId },
      {
        jobId: runId,
        // The record holds what a run did; a completed job is only its timer. Kept, BullMQ would trim the
        // completed set on every completion (four more commands per run). A retry or takeover needs no
        // completed job: an ended run's job, added again, is skipped.
        removeOnComplete: true,
        removeOnFail: { age: 86_400 },
      },
    );
  }

  /**
   * Makes sure a live job exists for the run: re-adds it when the job is
   * missing or already finished. Returns true when a job was (re)added.
   */
  async ensureJob(conversationId: string, runId: string): Promise<boolean> {
    const job: Job<RunJobData> | undefined = await this.queue.getJob(runId);
    if (job) {
      const state = await job.getState();
      if (LIVE_STATES.has(state)) return false;
      await job.remove().catch(() => undefined);
    }
    await this.enqueue(conversationId, runId);
    return true;
  }

  /** Closes the queue's connections. */
  async close(): Promise<void> {
    this.unwatch();
    await this.queue.close();
  }
}

/** Logs a BullMQ error event: connection errors at debug (an outage is reported once per process), others at error. */
export function logQueueError(logger: Logger | undefined, err: unknown, msg: string): void {
  if (isRedisUnavailable(err)) logger?.debug({ err }, msg);
  else logger?.error({ err }, msg);
}
