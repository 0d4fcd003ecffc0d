/**
 * The BullMQ worker that turns schedule fires into inputs. Any number of
 * processes may run it: BullMQ gives each tick's job to one worker, and a
 * tick's input is deduped by its update key (`schedule:<id>:<tick ms>`), so a
 * worker killed after ingesting and before completing the job (the job is
 * redelivered) still makes one input. The input goes through the
 * conversation's input policy like a user message: steered into an active
 * run, parked for a successor, or starting a run, never a run beside another.
 *
 * A schedule's fire is asked the access rule first (`AccessRules`, the one the
 * host's gate asks of every message): when its owner, or the group it was made
 * in, may not talk in the conversation any more, the fire is skipped and
 * nothing is ingested. A recurring schedule is kept, so it fires again once
 * access is back; a one-shot's one fire is over. Heartbeats are the
 * configuration's own and are not asked.
 */

import { type ConnectionOptions, type Job, Worker } from 'bullmq';
import { ingestEvent } from '../events.js';
import type { IngestDeps, IngestOptions } from '../ingest.js';
import type { Logger } from '../logger.js';
import type { AccessRules } from '../people/access-rule.js';
import type { Dispatch } from '../protocol/dispatch.js';
import { logQueueError, type RunQueue } from '../protocol/run-queue.js';
import type { IngestResult, InputPolicy } from '../protocol/types.js';
import { conversationKeys } from '../redis/keys.js';
import type { RedisClient } from '../scripts/index.js';
import { metrics } from '../telemetry/metrics.js';
import { context, failSpan, SPAN, type Span, SpanKind, trace, tracer } from '../telemetry/tracing.js';
import { DEFAULT_FIRE_QUEUE, type FireJobData, type Schedules } from './schedules.js';
import { describeWhen, type Schedule } from './spec.js';

/** A fire that finds no record this soon after its schedule's creation is retried: the record is written just after BullMQ's side. */
const ORPHAN_GRACE_MS = 30_000;

/** What became of one fire (the `result` label of `steerbot_schedule_fires_total`). */
export type FireResult = 'ingested' | 'duplicate' | 'missed' | 'busy' | 'orphan' | 'stale' | 'no-access' | 'refused';

/** One fire, ready to become an input. */
export interface Fire {
  schedule: Schedule;
  /** The tick's scheduled time (epoch ms): part of the input's dedupe identity. */
  scheduledAt: number;
  /** When it was handled (epoch ms). */
  firedAt: number;
}

/** Options of the fire worker. */
export interface FireWorkerOptions {
  schedules: Schedules;
  dispatch: Dispatch;
  /** Where new runs are enqueued. */
  queue: Pick<RunQueue, 'enqueue'>;
  /** The command connection (reads whether a conversation is busy). */
  client: RedisClient;
  prefix: string;
  /** BullMQ connection for the worker (needs `maxRetriesPerRequest: null`). */
  connection: ConnectionOptions;
  bullPrefix: string;
  /** Queue name. Default `steerbot-schedules`. */
  queueName?: string;
  /**
   * The access rule under this process's configuration (`access`) and the
   * access store: a schedule's fire whose owner, or whose group, may not talk
   * in its conversation now is skipped (`no-access`). Heartbeats are not asked.
   */
  access: Pick<AccessRules, 'decide'>;
  /** The channel's input policy of a conversation (its `/queue` override still wins); undefined: the default. */
  policyFor?: (conversationId: string) => InputPolicy | undefined;
  /**
   * Whether a schedule is a heartbeat the configuration no longer has
   * (`HeartbeatKeeper.isStale`): its fire cancels it instead. Undefined: no heartbeat is stale.
   */
  isStaleHeartbeat?: (schedule: Schedule) => boolean;
  /** A fire handled later than this after its tick counts as missed (downtime), in ms. Default 60 000. */
  missedAfterMs?: number;
  /** Fires handled at once by this process. Default 16. */
  concurrency?: number;
  /** BullMQ job lock, in ms: a fire whose worker died is redelivered after it. Default 10 000. */
  lockDurationMs?: number;
  /** BullMQ stalled check, in ms. Default 2 000. */
  stalledIntervalMs?: number;
  /** Clock, in epoch ms. Default `Date.now`. */
  now?: () => number;
  logger: Logger;
}

/** Handles schedule fires. */
export class ScheduleFireWorker {
  readonly worker: Worker<FireJobData, FireResult>;
  private readonly now: () => number;

  constructor(private readonly o: FireWorkerOptions) {
    this.now = o.now ?? Date.now;
    this.worker = new Worker<FireJobData, FireResult>(o.queueName ?? DEFAULT_FIRE_QUEUE, (job) => this.process(job), {
      connection: o.connection,
      prefix: o.bullPrefix,
      concurrency: o.concurrency ?? 16,
      lockDuration: o.lockDurationMs ?? 10_000,
      stalledInterval: o.stalledIntervalMs ?? 2000,
      // A redelivered fire is deduped by its update key, so redelivery is always safe.
      maxStalledCount: 100,
    });
    this.worker.on('error', (err) => logQueueError(o.logger, err, 'schedule worker error'));
  }

  /** Handles one fire job; exported for tests through `handle`. */
  private async process(job: Job<FireJobData, FireResult>): Promise<FireResult> {
    const scheduledAt = job.opts.prevMillis ?? job.timestamp + (job.opts.delay ?? 0);
    return this.handle(job.data, scheduledAt);
  }

  /**
   * Handles the fire of `data.scheduleId` due at `scheduledAt` (epoch ms):
   * drops it when the schedule is gone (removing its BullMQ side), when it is
   * a stale heartbeat (cancelling it), when it was missed and the schedule
   * skips missed fires, when its owner or group lost access (a one-shot is
   * then over), or when it is a heartbeat and the conversation is busy;
   * otherwise ingests it. Throws when Redis fails
   * (BullMQ retries the job; the update key keeps the retry from making a second input).
   */
  async handle(data: FireJobData, scheduledAt: number): Promise<FireResult> {
    const schedule = await this.o.schedules.get(data.conversationId, data.scheduleId);
    const origin = schedule?.origin ?? 'schedule';
    const span = tracer().startSpan(SPAN.scheduleFire, {
      kind: SpanKind.CONSUMER,
      attributes: {
        'steerbot.conversation_id': data.conversationId,
        'steerbot.schedule_id': data.scheduleId,
        'steerbot.schedule.origin': origin,
        'steerbot.schedule.scheduled_at': new Date(scheduledAt).toISOString(),
      },
    });
    try {
      const result = schedule ? await this.fire({ schedule, scheduledAt, firedAt: this.now() }, span) : await this.orphan(data);
      span.setAttribute('steerbot.schedule.result', result);
      metrics.scheduleFires.inc({ origin, result });
      return result;
    } catch (err) {
      metrics.scheduleFires.inc({ origin, result: 'failed' });
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  private async fire(f: Fire, span: Span): Promise<FireResult> {
    const { schedule } = f;
    const log = this.o.logger.child({ conversationId: schedule.conversationId, scheduleId: schedule.id });
    if (this.o.isStaleHeartbeat?.(schedule)) {
      // Its setting changed (a new heartbeat replaces it) or was removed: firing it would be a heartbeat nobody configured.
      await this.o.schedules.cancel(schedule.conversationId, schedule.id);
      log.info('stale heartbeat cancelled (its setting changed or was removed)');
      return 'stale';
    }
    const lagMs = f.firedAt - f.scheduledAt;
    if (lagMs > (this.o.missedAfterMs ?? 60_000) && schedule.missed === 'skip') {
      log.info({ lagMs }, 'missed fire skipped (the schedule skips fires missed during downtime)');
      await this.done(schedule);
      return 'missed';
    }
    if (schedule.origin === 'schedule') {
      const decision = await this.o.access.decide({ conversationId: schedule.conversationId, identity: schedule.owner, group: schedule.group === true });
      if (decision.kind === 'refuse') {
        // Skipped, not cancelled: the person may be approved or listed again (a recurring schedule then fires again).
        log.info({ reason: decision.reason }, 'fire skipped: its owner or group may not talk in the conversation any more');
        await this.done(schedule);
        return 'no-access';
      }
    }
    if (schedule.origin === 'heartbeat' && (await this.busy(schedule.conversationId))) return 'busy';
    const policy = this.o.policyFor?.(schedule.conversationId);
    // Inside the fire's span: the ingest span (and the run answering the fire) continue its trace.
    const result = await context.with(trace.setSpan(context.active(), span), () =>
      ingestFire({ dispatch: this.o.dispatch, queue: this.o.queue, logger: this.o.logger }, f, policy ? { policy } : {}),
    );
    if (result.kind === 'purged') {
      // A purged conversation's schedules go with it.
      await this.o.schedules.disarm(schedule);
      await this.o.schedules.forget(schedule.conversationId, schedule.id, schedule.owner);
      return 'refused';
    }
    if (result.kind !== 'duplicate') metrics.scheduleFireLag.observe({ origin: schedule.origin }, Math.max(0, lagMs) / 1000);
    await this.done(schedule);
    log.debug({ result: result.kind, lagMs }, 'schedule fired');
    return result.kind === 'duplicate' ? 'duplicate' : result.kind === 'refused' ? 'refused' : 'ingested';
  }

  /** A one-shot is over once its fire was handled. */
  private async done(schedule: Schedule): Promise<void> {
    if (schedule.when.kind !== 'once') return;
    if (await this.o.schedules.forget(schedule.conversationId, schedule.id, schedule.owner)) {
      metrics.schedulesChanged.inc({ change: 'done', kind: 'once', origin: schedule.origin });
    }
  }

  /**
   * A fire without a readable record: a cancelled or purged schedule (its
   * BullMQ side is removed), one being created (retried), or one a newer
   * release wrote (retried, so a worker of that release fires it: removing
   * its timer would cancel a schedule a person made).
   */
  private async orphan(data: FireJobData): Promise<FireResult> {
    if (this.now() - data.createdAt < ORPHAN_GRACE_MS) throw new Error(`schedule ${data.scheduleId} has no record yet; retrying`);
    if (await this.o.schedules.stored(data.conversationId, data.scheduleId)) {
      throw new Error(`schedule ${data.scheduleId} is stored in a shape this build cannot read (a newer release's?); retrying`);
    }
    await this.o.schedules.queue.removeJobScheduler(data.scheduleId);
    return 'orphan';
  }

  /** Whether the conversation has an active run or waiting input: a heartbeat waits for the next idle tick. */
  private async busy(conversationId: string): Promise<boolean> {
    const k = conversationKeys(this.o.prefix, conversationId);
    const [active, pending] = await Promise.all([this.o.client.exists(k.active), this.o.client.llen(k.pending)]);
    return active === 1 || pending > 0;
  }

  /** Stops taking fires; a fire in flight finishes (or is redelivered to another process). */
  async close(): Promise<void> {
    await this.worker.close();
  }
}

/**
 * The one place a fire becomes an input: an input of origin `schedule` or
 * `heartbeat` (`ingestEvent`), deduped by the schedule id and the tick,
 * recorded and routed by the conversation's input policy; a new run is enqueued.
 * The origin names the schedule's `owner`: the run is charged to them (budgets, memory).
 */
export function ingestFire(deps: IngestDeps, f: Fire, opts: IngestOptions): Promise<IngestResult> {
  const { schedule } = f;
  return ingestEvent(
    deps,
    {
      conversationId: schedule.conversationId,
      origin: {
        kind: schedule.origin,
        source: schedule.id,
        id: String(f.scheduledAt),
        data: { due: new Date(f.scheduledAt).toISOString(), schedule: describeWhen(schedule.when) },
        // Who the run answering it is charged to; absent: the operator.
        ...(schedule.owner !== undefined && { owner: schedule.owner }),
      },
      text: schedule.prompt,
      ...(schedule.group === true && { group: true }),
    },
    opts,
  );
}
