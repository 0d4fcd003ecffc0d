/**
 * Schedules against a real Redis and real BullMQ: creation with limits,
 * listing with next fires, cancel, and the fire worker turning fires into
 * inputs through the input policy (a new run, or steered into the active run).
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError, ScheduleLimitError } from '../../src/errors.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { bullPrefixFor, type RunQueue } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import { onceJobId, type Schedules } from '../../src/schedules/schedules.js';
import { DEFAULT_SCHEDULE_LIMITS, parseDuration, parseScheduleRequest } from '../../src/schedules/spec.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl, testPrefix } from '../helpers/redis.js';
import { bullConn, closeScheduleParts, openAccess, scheduleParts } from '../helpers/schedule-parts.js';

const CID = 'telegram:42';
const logger = pino({ level: 'silent' });

let redis: Redis;
let prefix: string;
let schedules: Schedules;
let queue: RunQueue;
let dispatch: Dispatch;
let worker: ScheduleFireWorker | undefined;

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.quit();
});

beforeEach(() => {
  prefix = testPrefix();
  ({ schedules, queue, dispatch } = scheduleParts(redis, prefix));
});

afterEach(async () => {
  await closeScheduleParts(redis, prefix, { schedules, queue, dispatch }, worker);
  worker = undefined;
});

function startWorker(opts: { missedAfterMs?: number } = {}): ScheduleFireWorker {
  worker = new ScheduleFireWorker({
    schedules,
    dispatch,
    queue,
    client: redis,
    prefix,
    connection: bullConn(),
    bullPrefix: bullPrefixFor(prefix),
    access: openAccess(redis, prefix),
    logger,
    ...opts,
  });
  return worker;
}

async function fireInputs(): Promise<Array<{ seq: number; text: string; origin?: { kind: string; source: string; id: string } }>> {
  const entries = await readRange(redis, conversationKeys(prefix, CID).log);
  return entries
    .filter((e) => e.kind === 'message.received')
    .map((e) => e as unknown as { seq: number; text: string; origin?: { kind: string; source: string; id: string } });
}

describe('parseDuration', () => {
  it('reads short and ISO 8601 durations', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('PT1H30M')).toBe(5_400_000);
    expect(() => parseDuration('P')).toThrow(InvalidInputError);
    expect(() => parseDuration('soon')).toThrow(/expected a duration/);
  });
});

describe('Schedules.create', () => {
  it('stores a one-shot, lists it with its fire time and arms one delayed job', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const s = await schedules.create(CID, { at, prompt: 'call Anna' }, { createdBy: 'agent' });
    expect(s.when).toEqual({ kind: 'once', at: Date.parse(at) });
    expect(s.next).toEqual([Date.parse(at)]);
    expect(s.missed).toBe('run-once');
    const listed = await schedules.list(CID);
    expect(listed.map((l) => [l.id, l.prompt, l.next[0]])).toEqual([[s.id, 'call Anna', Date.parse(at)]]);
    expect(await schedules.queue.getJobState(onceJobId(s.id))).toBe('delayed');
  });

  it('echoes the next fires of a cron line in its time zone', async () => {
    const s = await schedules.create(CID, { cron: '0 9 * * 1-5', tz: 'Europe/Paris', prompt: 'summarise the tickets' }, { createdBy: 'agent' });
    const listed = await schedules.list(CID, 3);
    expect(listed[0]!.next).toHaveLength(3);
    for (const t of listed[0]!.next) {
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Paris', hour: '2-digit', minute: '2-digit', weekday: 'short' }).format(t);
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/);
    }
    expect(await schedules.queue.getJobScheduler(s.id)).toMatchObject({ pattern: '0 9 * * 1-5', tz: 'Europe/Paris' });
  });

  it('refuses bad requests with an error naming the field, writing nothing', async () => {
    const bad = [
      { prompt: 'x' },
      { at: '2020-01-01T00:00:00Z', prompt: 'x' },
      { at: 'tomorrow at 9', prompt: 'x' },
      { at: '2030-01-01T09:00', prompt: 'x' },
      { cron: 'not a cron', prompt: 'x' },
      { cron: '0 9 * * *', tz: 'Mars/Olympus', prompt: 'x' },
      { every: '10 parsecs', prompt: 'x' },
      { in: '10m', every: '1h', prompt: 'x' },
      { in: '10m', prompt: '  ' },
    ];
    for (const r of bad) await expect(schedules.create(CID, r, { createdBy: 'agent' })).rejects.toBeInstanceOf(InvalidInputError);
    expect(await redis.exists(conversationKeys(prefix, CID).schedules)).toBe(0);
    expect(await schedules.queue.getJobSchedulersCount()).toBe(0);
  });

  it('refuses an interval shorter than the limit, and more schedules than the limit', async () => {
    await expect(schedules.create(CID, { every: '0.5s', prompt: 'x' }, { createdBy: 'agent' })).rejects.toThrow(/shortest interval allowed, 1 s/);
    const limits = { ...DEFAULT_SCHEDULE_LIMITS, minIntervalSeconds: 60 };
    expect(() => parseScheduleRequest({ cron: '*/10 * * * * *', prompt: 'x' }, limits, Date.now())).toThrow(
      /10 s apart; the shortest interval allowed is 60 s/,
    );
    expect(parseScheduleRequest({ cron: '* * * * *', prompt: 'x' }, limits, Date.now()).when).toEqual({ kind: 'cron', cron: '* * * * *', tz: 'UTC' });
    for (let i = 0; i < 3; i++) await schedules.create(CID, { in: `${i + 1}h`, prompt: `p${i}` }, { createdBy: 'agent' });
    const err = await schedules.create(CID, { in: '5h', prompt: 'one too many' }, { createdBy: 'agent' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ScheduleLimitError);
    expect((err as ScheduleLimitError).code).toBe('SCHEDULE_LIMIT');
    expect(await redis.hlen(conversationKeys(prefix, CID).schedules)).toBe(3);
    expect(await schedules.queue.getDelayedCount()).toBe(3);
  });

  it('refuses an unattended one-shot sooner than the shortest interval, and takes any a person asks for', () => {
    const limits = { ...DEFAULT_SCHEDULE_LIMITS, minIntervalSeconds: 60 };
    const now = Date.now();
    const unattended = { unattended: true };
    expect(() => parseScheduleRequest({ in: '59s', prompt: 'x' }, limits, now, unattended)).toThrow(
      /^in: 59 s ahead is too soon: .* no sooner than 1 min ahead$/,
    );
    expect(() => parseScheduleRequest({ at: new Date(now + 30_000).toISOString(), prompt: 'x' }, limits, now, unattended)).toThrow(
      /^at: 30 s ahead is too soon/,
    );
    expect(parseScheduleRequest({ in: '60s', prompt: 'x' }, limits, now, unattended).when).toEqual({ kind: 'once', at: now + 60_000 });
    expect(parseScheduleRequest({ in: '1s', prompt: 'x' }, limits, now).when).toEqual({ kind: 'once', at: now + 1000 });
  });

  it('at the cap, creating an existing schedule id again (a re-run) succeeds and the schedule keeps firing', async () => {
    startWorker();
    const [first, ...rest] = ['s00000000000a', 's00000000000b', 's00000000000c'] as const;
    const ids = [first, ...rest];
    await schedules.create(CID, { every: '1s', prompt: 'tick' }, { createdBy: 'agent', id: first });
    for (const id of rest) await schedules.create(CID, { in: '5h', prompt: id }, { createdBy: 'agent', id });
    const again = await schedules.create(CID, { every: '1s', prompt: 'tick' }, { createdBy: 'agent', id: first });
    expect(again).toMatchObject({ id: first, prompt: 'tick' });
    expect((await schedules.list(CID)).map((s) => s.id).sort()).toEqual(ids);
    expect(await schedules.queue.getJobSchedulersCount()).toBe(1);
    await waitFor(async () => ((await fireInputs()).some((i) => i.origin?.source === first) ? true : undefined), 10_000, 'a tick of the re-created schedule');
    // A new id at the cap is still refused.
    await expect(schedules.create(CID, { in: '5h', prompt: 'one too many' }, { createdBy: 'agent' })).rejects.toBeInstanceOf(ScheduleLimitError);
  });

  it('cancel removes the record and the BullMQ side', async () => {
    const a = await schedules.create(CID, { every: '1h', prompt: 'a' }, { createdBy: 'agent' });
    const b = await schedules.create(CID, { in: '1h', prompt: 'b' }, { createdBy: 'agent' });
    expect(await schedules.cancel(CID, a.id)).toBe(true);
    expect(await schedules.cancel(CID, b.id)).toBe(true);
    expect(await schedules.cancel(CID, b.id)).toBe(false);
    expect(await schedules.list(CID)).toEqual([]);
    expect(await schedules.queue.getJobSchedulersCount()).toBe(0);
    expect(await schedules.queue.getJob(onceJobId(b.id))).toBeUndefined();
  });
});

describe('ScheduleFireWorker', () => {
  it('a one-shot fires once: its input starts a run, and the schedule is gone', async () => {
    startWorker();
    const s = await schedules.create(CID, { in: '1s', prompt: 'call Anna' }, { createdBy: 'agent' });
    const inputs = await waitFor(async () => ((await fireInputs()).length > 0 ? fireInputs() : undefined), 10_000, 'the fire');
    expect(inputs).toHaveLength(1);
    expect(inputs[0]!.text).toBe('call Anna');
    expect(inputs[0]!.origin).toMatchObject({ kind: 'schedule', source: s.id });
    const runId = await redis.get(conversationKeys(prefix, CID).active);
    expect(runId).toBeTruthy();
    expect(await queue.queue.getJob(runId!)).toBeDefined();
    await waitFor(async () => (await schedules.list(CID)).length === 0, 5000, 'the one-shot to be forgotten');
    expect(await schedules.get(CID, s.id)).toBeUndefined();
  });

  it('a fire during an active run is steered into it, never a second run', async () => {
    const first = await dispatch.ingest({ conversationId: CID, updateKey: 'telegram:1', sender: { id: 'u1' }, text: 'hello' });
    expect(first.kind).toBe('new-run');
    // The run is running (a runner took it): the fire is steered.
    await redis.hset(conversationKeys(prefix, CID).run((first as { runId: string }).runId), 'state', 'running');
    const w = startWorker();
    const s = await schedules.create(CID, { in: '1h', prompt: 'check the build' }, { createdBy: 'agent' });
    expect(await w.handle({ conversationId: CID, scheduleId: s.id, createdAt: s.createdAt }, Date.now())).toBe('ingested');
    const steered = await redis.lrange(conversationKeys(prefix, CID).steer((first as { runId: string }).runId), 0, -1);
    expect(steered).toHaveLength(1);
    expect(await redis.get(conversationKeys(prefix, CID).active)).toBe((first as { runId: string }).runId);
  });

  it('the same tick handled twice (a redelivered job) makes one input', async () => {
    const w = startWorker();
    const s = await schedules.create(CID, { every: '1h', prompt: 'report' }, { createdBy: 'agent' });
    const tick = Date.now();
    const data = { conversationId: CID, scheduleId: s.id, createdAt: s.createdAt };
    const results = await Promise.all([w.handle(data, tick), w.handle(data, tick)]);
    expect(results.sort()).toEqual(['duplicate', 'ingested']);
    expect(await fireInputs()).toHaveLength(1);
  });

  it('a fire missed during downtime is skipped or run once, per schedule', async () => {
    const w = startWorker({ missedAfterMs: 60_000 });
    const skip = await schedules.create(CID, { every: '1h', prompt: 'skip me', missed: 'skip' }, { createdBy: 'agent' });
    const runOnce = await schedules.create(CID, { every: '1h', prompt: 'run me', missed: 'run-once' }, { createdBy: 'agent' });
    const longAgo = Date.now() - 3_600_000;
    expect(await w.handle({ conversationId: CID, scheduleId: skip.id, createdAt: skip.createdAt }, longAgo)).toBe('missed');
    expect(await w.handle({ conversationId: CID, scheduleId: runOnce.id, createdAt: runOnce.createdAt }, longAgo)).toBe('ingested');
    const inputs = await fireInputs();
    expect(inputs.map((i) => i.text.includes('run me'))).toEqual([true]);
  });

  it('a heartbeat waits while the conversation is busy', async () => {
    const w = startWorker();
    const hb = await schedules.create(CID, { every: '30m', prompt: 'anything new?' }, { createdBy: 'config', origin: 'heartbeat' });
    await dispatch.ingest({ conversationId: CID, updateKey: 'telegram:1', sender: { id: 'u1' }, text: 'hello' });
    expect(await w.handle({ conversationId: CID, scheduleId: hb.id, createdAt: hb.createdAt }, Date.now())).toBe('busy');
    expect(await fireInputs()).toHaveLength(1);
  });

  it('a fire of a cancelled schedule removes its scheduler and makes no input', async () => {
    const w = startWorker();
    const s = await schedules.create(CID, { every: '1h', prompt: 'gone' }, { createdBy: 'agent' });
    await schedules.forget(CID, s.id);
    expect(await w.handle({ conversationId: CID, scheduleId: s.id, createdAt: s.createdAt - 60_000 }, Date.now())).toBe('orphan');
    expect(await schedules.queue.getJobScheduler(s.id)).toBeUndefined();
    expect(await fireInputs()).toHaveLength(0);
  });

  it('an every-N schedule fires on its interval, each tick once', async () => {
    startWorker();
    await schedules.create(CID, { every: '1s', prompt: 'tick' }, { createdBy: 'agent' });
    const inputs = await waitFor(
      async () => {
        const got = await fireInputs();
        return got.length >= 2 ? got : undefined;
      },
      15_000,
      'two ticks',
    );
    expect(inputs.every((i) => i.text.includes('tick'))).toBe(true);
    expect(inputs.every((i) => i.origin?.kind === 'schedule')).toBe(true);
    const ticks = inputs.map((i) => Number(i.origin?.id));
    expect(new Set(ticks).size).toBe(inputs.length);
    // One interval apart: BullMQ's ticks, not one per process or per retry.
    expect(ticks[1]! - ticks[0]!).toBe(1000);
  });
});

describe('purge', () => {
  it('deletes the conversation schedules with it', async () => {
    await dispatch.ingest({ conversationId: CID, updateKey: 'telegram:1', sender: { id: 'u1' }, text: 'hello' });
    await redis.del(conversationKeys(prefix, CID).active);
    const s = await schedules.create(CID, { every: '1h', prompt: 'x' }, { createdBy: 'agent' });
    expect(await schedules.disarmAll(CID)).toBe(1);
    const r = await purgeConversation(redis, prefix, CID, { stopActive: true });
    expect(r.kind).toBe('purged');
    expect(await schedules.get(CID, s.id)).toBeUndefined();
    expect(await schedules.queue.getJobScheduler(s.id)).toBeUndefined();
    await expect(schedules.create(CID, { every: '1h', prompt: 'x' }, { createdBy: 'agent' })).rejects.toThrow(/purged/);
  });
});
