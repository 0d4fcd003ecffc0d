/**
 * A conversation's schedules: the record in the conversation's `schedules`
 * hash, the timing in BullMQ. A recurring schedule is a BullMQ job scheduler
 * (`upsertJobScheduler`, id = schedule id): BullMQ creates one job per tick,
 * with an id derived from the scheduler and the tick, so any number of
 * processes adding or serving it still get one job per tick. A one-shot is one
 * delayed job whose id is derived from the schedule id (a job scheduler with
 * `limit: 1` is the same delayed job plus a scheduler record to clean up).
 *
 * The BullMQ side is written first, the record second: a process that dies
 * between the two leaves a scheduler without a record, and its first fire
 * finds no record and removes it (see `ScheduleFireWorker`). The record is what
 * counts: listed, limited, and deleted by purge with the conversation.
 *
 * A schedule names the identity its fires are charged to (`owner`), and each
 * owner has an index of their schedules (`<p>:{i:<identity>}:schedules`, a
 * set of `<schedule id>:<conversation id>`), so purging the person cancels
 * them. The index entry is written before the record (an entry without a
 * record is skipped), removed with it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { type ConnectionOptions, type JobType, Queue } from 'bullmq';
import { z } from 'zod';
import { DEFAULTS } from '../config/defaults.js';
import { InvalidInputError, ScheduleLimitError, ScriptError } from '../errors.js';
import { parseJsonOrUndefined } from '../json.js';
import type { Logger } from '../logger.js';
import { assertIdentityId } from '../people/identity.js';
import { logQueueError } from '../protocol/run-queue.js';
import { conversationKeys } from '../redis/keys.js';
import { readStored, stamp, storedShape } from '../redis/stored.js';
import { type RedisClient, runScript } from '../scripts/index.js';
import { metrics } from '../telemetry/metrics.js';
import {
  DEFAULT_SCHEDULE_LIMITS,
  nextFires,
  type ParseOptions,
  parseScheduleRequest,
  type Schedule,
  type ScheduleLimits,
  type ScheduleOrigin,
  type ScheduleRequest,
} from './spec.js';

/** What a fire job carries. */
export interface FireJobData {
  conversationId: string;
  scheduleId: string;
  /** When the schedule was created (epoch ms): a fire that finds no record this soon after waits for it. */
  createdAt: number;
}

/** Default name of the BullMQ queue of fires. */
export const DEFAULT_FIRE_QUEUE = DEFAULTS.schedules.queueName;

/** Job id of a one-shot's delayed job. */
export function onceJobId(scheduleId: string): string {
  return `once-${scheduleId}`;
}

// How BullMQ keeps fire jobs: a fire's outcome is in the record and the metrics, the job is only the timer.
const FIRE_JOB_OPTS = { removeOnComplete: true, removeOnFail: { age: 86_400 }, attempts: 5, backoff: { type: 'exponential', delay: 1000 } };

const SCHEDULE_ID_RE = /^s[0-9a-z]{12}$/;

const whenSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('once'), at: z.number() }),
  z.object({ kind: z.literal('cron'), cron: z.string(), tz: z.string() }),
  z.object({ kind: z.literal('every'), everyMs: z.number() }),
]);
const scheduleSchema = z.object({
  id: z.string(),
  conversationId: z.string(),
  when: whenSchema,
  prompt: z.string(),
  missed: z.enum(['skip', 'run-once']),
  origin: z.enum(['schedule', 'heartbeat']),
  createdAt: z.number(),
  createdBy: z.string(),
  owner: z.string().optional(),
  group: z.literal(true).optional(),
}) as z.ZodType<Schedule>;

/** A schedule as stored (JSON in the conversation's `schedules` hash), versioned for rolling upgrades. */
const storedSchedule = storedShape<Schedule>({ name: 'schedule', version: 1, field: 'v', schema: scheduleSchema });

/** A schedule with its next fire time(s), as listed. */
export interface ListedSchedule extends Schedule {
  /** The next fire times (epoch ms), soonest first; empty when none is due any more. */
  next: number[];
}

/** Options of `Schedules`. */
export interface SchedulesOptions {
  /** The command connection (records). */
  client: RedisClient;
  /** Key prefix (`redis.prefix`). */
  prefix: string;
  /** BullMQ connection of the fire queue. */
  connection: ConnectionOptions;
  /** BullMQ key prefix: `bullPrefixFor(redis.prefix)`. */
  bullPrefix: string;
  /** Queue name. Default `steerbot-schedules`. */
  queueName?: string;
  /** Default: `DEFAULT_SCHEDULE_LIMITS`. */
  limits?: Partial<ScheduleLimits>;
  /** Clock, in epoch ms (tests). Default `Date.now`. */
  now?: () => number;
  logger?: Logger;
}

/** Creates, lists and cancels the schedules of conversations. */
export class Schedules {
  readonly queue: Queue<FireJobData>;
  readonly limits: ScheduleLimits;
  private readonly now: () => number;

  constructor(private readonly o: SchedulesOptions) {
    this.limits = { ...DEFAULT_SCHEDULE_LIMITS, ...o.limits };
    this.now = o.now ?? Date.now;
    this.queue = new Queue<FireJobData>(o.queueName ?? DEFAULT_FIRE_QUEUE, { connection: o.connection, prefix: o.bullPrefix });
    this.queue.on('error', (err) => logQueueError(o.logger, err, 'schedule queue error'));
    // Delayed fire jobs are the one-shots and the next ticks waiting: `steerbot_queue_jobs{queue="steerbot-schedules"}`.
    this.unwatch = metrics.watchQueue(this.queue.name, (states) => this.queue.getJobCounts(...(states as JobType[])));
  }

  private readonly unwatch: () => void;

  /** Checks a request without writing anything; returns what `create` would store and its next fire times. Throws InvalidInputError. */
  preview(request: ScheduleRequest, count = 3, opts: ParseOptions = {}): { parts: Pick<Schedule, 'when' | 'prompt' | 'missed'>; next: number[] } {
    const now = this.now();
    const parts = parseScheduleRequest(request, this.limits, now, opts);
    return { parts, next: nextFires(parts.when, now, count) };
  }

  /**
   * Validates and creates a schedule for a conversation; returns it with its
   * next fire times. Throws InvalidInputError on a bad request (nothing
   * written), ScheduleLimitError when the conversation has as many schedules as allowed.
   * `unattended`: made by a run no person's message started (`ParseOptions`).
   */
  async create(
    conversationId: string,
    request: ScheduleRequest,
    opts: { createdBy: string; owner?: string | undefined; group?: boolean; origin?: ScheduleOrigin; id?: string } & ParseOptions,
  ): Promise<ListedSchedule> {
    const k = conversationKeys(this.o.prefix, conversationId);
    const { parts, next } = this.preview(request, 3, { unattended: opts.unattended });
    const id = opts.id ?? newScheduleId();
    if (!SCHEDULE_ID_RE.test(id)) throw new InvalidInputError('schedule id must be s and 12 characters of [0-9a-z]');
    if (opts.owner !== undefined) assertIdentityId(opts.owner);
    const schedule: Schedule = {
      id,
      conversationId,
      ...parts,
      origin: opts.origin ?? 'schedule',
      createdAt: this.now(),
      createdBy: opts.createdBy,
      ...(opts.owner !== undefined && { owner: opts.owner }),
      ...(opts.group === true && { group: true as const }),
    };
    // The cap is the script's to decide (atomically; an id that exists is a re-run, not a new place).
    const existed = (await this.o.client.hexists(k.schedules, id)) === 1;
    await this.arm(schedule);
    let reply: Array<string | number>;
    try {
      // The owner's index before the record: a purge of the person then finds every schedule they have.
      if (schedule.owner !== undefined) await this.o.client.sadd(ownerIndexKey(this.o.prefix, schedule.owner), indexEntry(schedule));
      reply = await runScript(
        this.o.client,
        'schedule-put',
        [k.schedules, k.tombstone],
        [id, JSON.stringify(stamp(storedSchedule, schedule)), this.limits.maxPerConversation],
      );
    } catch (err) {
      // A schedule that was there keeps its timer.
      if (!existed) await this.disarm(schedule).catch(() => undefined);
      throw err;
    }
    if (reply[0] !== 'ok') {
      await this.disarm(schedule);
      await this.unindex(schedule);
      if (reply[0] === 'limit') throw limitError(Number(reply[1]), this.limits.maxPerConversation);
      if (reply[0] === 'purged') throw new InvalidInputError('the conversation was purged; it takes no schedules');
      throw new ScriptError('schedule-put', `unexpected reply ${JSON.stringify(reply)}`);
    }
    metrics.schedulesChanged.inc({ change: 'created', kind: schedule.when.kind, origin: schedule.origin });
    return { ...schedule, next };
  }

  /** The conversation's schedules, soonest next fire first. Unreadable records are left out (and logged). */
  async list(conversationId: string, count = 1): Promise<ListedSchedule[]> {
    const k = conversationKeys(this.o.prefix, conversationId);
    const raw = await this.o.client.hgetall(k.schedules);
    const parsed = Object.values(raw).flatMap((json) => this.parse(json) ?? []);
    // The next fires of all at once: an `every` schedule's is a read of BullMQ's scheduler, and those reads go out together.
    const out: ListedSchedule[] = await Promise.all(parsed.map(async (s) => ({ ...s, next: await this.nextOf(s, count) })));
    return out.sort((a, b) => (a.next[0] ?? Number.POSITIVE_INFINITY) - (b.next[0] ?? Number.POSITIVE_INFINITY));
  }

  /** Whether a record of schedule `id` is stored, readable by this build or not. */
  async stored(conversationId: string, id: string): Promise<boolean> {
    return (await this.o.client.hexists(conversationKeys(this.o.prefix, conversationId).schedules, id)) === 1;
  }

  /** One schedule, or undefined (none, or one this build cannot read). */
  async get(conversationId: string, id: string): Promise<Schedule | undefined> {
    const json = await this.o.client.hget(conversationKeys(this.o.prefix, conversationId).schedules, id);
    return json === null ? undefined : this.parse(json);
  }

  /** Cancels a schedule: true when it existed. Its BullMQ side goes first, so a cancelled schedule does not fire again. */
  async cancel(conversationId: string, id: string): Promise<boolean> {
    const k = conversationKeys(this.o.prefix, conversationId);
    const s = await this.get(conversationId, id);
    if (!s) return false;
    await this.disarm(s);
    const removed = (await this.o.client.hdel(k.schedules, id)) === 1;
    await this.unindex(s);
    if (removed) metrics.schedulesChanged.inc({ change: 'cancelled', kind: s.when.kind, origin: s.origin });
    return removed;
  }

  /** Removes a schedule's record only (a one-shot after its fire): true when it existed. */
  async forget(conversationId: string, id: string, owner?: string): Promise<boolean> {
    const removed = (await this.o.client.hdel(conversationKeys(this.o.prefix, conversationId).schedules, id)) === 1;
    await this.unindex({ conversationId, id, owner });
    return removed;
  }

  /**
   * Cancels every schedule `identity` owns, in every conversation (purge of a
   * person; their schedules' fires would be charged to nobody), and deletes
   * their index. Returns how many were cancelled.
   */
  async cancelOwnedBy(identity: string): Promise<number> {
    const key = ownerIndexKey(this.o.prefix, identity);
    let cancelled = 0;
    for (const entry of await this.o.client.smembers(key)) {
      const [id, conversationId] = splitOwnerEntry(entry);
      if ((await this.get(conversationId, id))?.owner === undefined) continue;
      if (await this.cancel(conversationId, id)) cancelled++;
    }
    await this.o.client.del(key);
    return cancelled;
  }

  /**
   * Identity `from` was linked into `into`: `into`'s purge must find `from`'s
   * schedules too. Their records keep `from`, which resolves to `into` now.
   */
  async mergeOwner(from: string, into: string): Promise<void> {
    const fromKey = ownerIndexKey(this.o.prefix, from);
    const entries = await this.o.client.smembers(fromKey);
    if (entries.length > 0) await this.o.client.sadd(ownerIndexKey(this.o.prefix, into), ...entries);
    await this.o.client.del(fromKey);
  }

  /**
   * Removes the BullMQ side of every schedule the conversation has (before a
   * purge deletes the records; a fire of one missed here finds no record and
   * removes its scheduler). Returns how many.
   */
  async disarmAll(conversationId: string): Promise<number> {
    const all = await this.list(conversationId, 0);
    await Promise.all(all.map((s) => this.disarm(s)));
    return all.length;
  }

  /** Removes the BullMQ side of a schedule (idempotent). */
  async disarm(s: Pick<Schedule, 'id' | 'when'>): Promise<void> {
    if (s.when.kind === 'once') await this.queue.remove(onceJobId(s.id));
    else await this.queue.removeJobScheduler(s.id);
  }

  /** Closes the queue's connection. */
  async close(): Promise<void> {
    this.unwatch();
    await this.queue.close();
  }

  /** Removes a schedule from its owner's index (a stale entry is harmless: purge skips it). */
  private async unindex(s: { conversationId: string; id: string; owner?: string | undefined }): Promise<void> {
    if (s.owner !== undefined) await this.o.client.srem(ownerIndexKey(this.o.prefix, s.owner), indexEntry(s));
  }

  private async arm(s: Schedule): Promise<void> {
    const data: FireJobData = { conversationId: s.conversationId, scheduleId: s.id, createdAt: s.createdAt };
    if (s.when.kind === 'once') {
      await this.queue.add('fire', data, { ...FIRE_JOB_OPTS, jobId: onceJobId(s.id), delay: Math.max(0, s.when.at - this.now()) });
      return;
    }
    const repeat =
      s.when.kind === 'cron' ? { pattern: s.when.cron, tz: s.when.tz } : { every: s.when.everyMs, startDate: new Date(s.createdAt + s.when.everyMs) };
    await this.queue.upsertJobScheduler(s.id, repeat, { name: 'fire', data, opts: FIRE_JOB_OPTS });
  }

  private async nextOf(s: Schedule, count: number): Promise<number[]> {
    if (count === 0) return [];
    if (s.when.kind !== 'every') return nextFires(s.when, this.now(), count);
    // `every` ticks are anchored where BullMQ put the first one: ask it.
    const scheduler = await this.queue.getJobScheduler(s.id);
    const first = scheduler?.next;
    if (first === undefined) return [];
    return Array.from({ length: count }, (_, i) => first + i * (s.when as { everyMs: number }).everyMs);
  }

  /** A stored schedule; undefined (and left in place) when it is broken or a newer release wrote it. */
  private parse(json: string): Schedule | undefined {
    const read = readStored(storedSchedule, parseJsonOrUndefined(json));
    if (read.kind === 'ok') return read.value;
    if (read.kind === 'newer') this.o.logger?.debug({ version: read.version }, 'schedule of a newer release left out');
    else this.o.logger?.warn({ reason: read.reason }, 'unreadable schedule record left out');
    return undefined;
  }
}

/** The index of the schedules an identity owns (`{i:<identity>}`: the person's slot, beside their memory and usage). */
export function ownerIndexKey(prefix: string, identity: string): string {
  assertIdentityId(identity);
  return `${prefix}:{i:${identity}}:schedules`;
}

// Schedule ids have no `:`, conversation ids may: the id goes first.
const indexEntry = (s: Pick<Schedule, 'id' | 'conversationId'>) => `${s.id}:${s.conversationId}`;
/** A `<schedule id>:<conversation id>` entry of an owner's index, as its two ids. */
export const splitOwnerEntry = (entry: string): [string, string] => {
  const at = entry.indexOf(':');
  return [entry.slice(0, at), entry.slice(at + 1)];
};

/** The schedule id derived from a key (a tool call's idempotency key, a heartbeat's settings): the same key, the same id. */
export function scheduleIdFor(key: string): string {
  return `s${createHash('sha256').update(key).digest().readBigUInt64BE().toString(36).padStart(13, '0').slice(-12)}`;
}

/** A fresh schedule id: `s` and 12 base-36 characters. */
export function newScheduleId(): string {
  const n = randomBytes(8).readBigUInt64BE();
  return `s${n.toString(36).padStart(13, '0').slice(-12)}`;
}

function limitError(count: number, max: number): ScheduleLimitError {
  return new ScheduleLimitError(`the conversation has ${count} schedules, the most allowed is ${max}: cancel one first`);
}
