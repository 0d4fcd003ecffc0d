/**
 * The ways people and the agent reach schedules: `/schedules` and
 * `/unschedule <id>` (deduped by update key; purge disarms them), and the
 * local agent's schedule tools (validation errors reach the model, next fire
 * times are echoed, a re-run of a call makes no second schedule, the tool
 * policy can take them away).
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { scheduleCommands } from '../../app/features/schedules/commands.js';
import { commandSet } from '../../host/commands/index.js';
import { hostPurge } from '../../host/purge.js';
import { createChannelHost } from '../../host/receive.js';
import { scheduleTools } from '../../plugins/local-agent/schedule-tools.js';
import { Toolbox } from '../../plugins/local-agent/toolbox.js';
import type { RunContext } from '../../runner/plugin.js';
import { ToolFailure } from '../../runner/tools/agent-tool.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { onceJobId, Schedules, scheduleIdFor } from '../../src/schedules/schedules.js';
import type { ScheduleRequest } from '../../src/schedules/spec.js';
import { testSchedulesFeature } from '../helpers/host-features.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const CID = 'telegram:7';
let redis: Redis;
let prefix: string;
let schedules: Schedules;
let dispatch: Dispatch;

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = testPrefix();
  schedules = new Schedules({
    client: redis,
    prefix,
    connection: new Redis(redisUrl(), { maxRetriesPerRequest: null }),
    bullPrefix: bullPrefixFor(prefix),
    limits: { maxPerConversation: 2 },
  });
  dispatch = new Dispatch({ client: redis, prefix, steeringCapable: true });
});
afterEach(async () => {
  await schedules.close();
  await cleanupPrefix(redis, prefix);
  await cleanupPrefix(redis, bullPrefixFor(prefix));
});

const source = (n: number) => ({ conversationId: CID, updateKey: `telegram:${n}`, sender: { id: 'u1' } });
const feature = () => testSchedulesFeature(schedules);
const deps = () => ({ dispatch, enqueue: async () => undefined, purge: hostPurge(dispatch.options, [feature()]) });
const runCommand = commandSet([scheduleCommands(undefined)]).run;
const withSchedules = () => commandSet([feature().commands!]);

describe('/schedules and /unschedule', () => {
  it('answer through a channel host given the schedules service', async () => {
    await schedules.create(CID, { in: '1h', prompt: 'stretch' }, { createdBy: 'user' });
    const texts: string[] = [];
    const host = createChannelHost({
      routes: { add: () => undefined },
      redis,
      prefix,
      logger: pino({ level: 'silent' }),
      dispatch,
      ingest: dispatch,
      enqueue: async () => undefined,
      features: [feature()],
      outbound: () => ({
        channelId: 'telegram',
        maxMessageChars: 4096,
        async send(_cid, text) {
          texts.push(text);
          return { messageId: String(texts.length) };
        },
      }),
    });
    const r = await host.receive('telegram', { conversationId: CID, chatId: '7', updateKey: 'telegram:host-1', sender: { id: 'u1' }, text: '/schedules' });
    expect((r as { reply: string }).reply).toMatch(/^Schedules \(1\):/);
    expect(texts).toHaveLength(1);
  });

  it('lists the schedules with their next fire, and cancels one once', async () => {
    const s = await schedules.create(CID, { cron: '0 8 * * 1-5', tz: 'Europe/Paris', prompt: 'Summarise the open tickets.' }, { createdBy: 'agent' });
    const listed = await withSchedules().run(deps(), { name: 'schedules', args: '' }, source(1), undefined);
    expect(listed.reply).toContain(`${s.id}: cron 0 8 * * 1-5 (Europe/Paris), next ${new Date(s.next[0]!).toISOString().replace('.000Z', 'Z')}`);
    expect(listed.reply).toContain('Summarise the open tickets.');
    // A redelivered command gets no second reply.
    expect(await withSchedules().run(deps(), { name: 'schedules', args: '' }, source(1), undefined)).toEqual({ reply: '', duplicate: true });

    const cancelled = await withSchedules().run(deps(), { name: 'unschedule', args: s.id }, source(2), undefined);
    expect(cancelled.reply).toBe(`Cancelled schedule ${s.id}.`);
    expect(await schedules.queue.getJobScheduler(s.id)).toBeUndefined();
    const again = await withSchedules().run(deps(), { name: 'unschedule', args: s.id }, source(3), undefined);
    expect(again.reply).toMatch(/^No schedule s/);
    expect((await withSchedules().run(deps(), { name: 'schedules', args: '' }, source(4), undefined)).reply).toBe('No schedules in this conversation.');
  });

  it('without the schedules service, says they are off', async () => {
    const r = await runCommand(
      { dispatch, enqueue: async () => undefined, purge: hostPurge(dispatch.options, []) },
      { name: 'schedules', args: '' },
      source(1),
      undefined,
    );
    expect(r.reply).toBe('Schedules are turned off on this bot.');
  });

  it('/purge deletes the schedules and removes their BullMQ side', async () => {
    await dispatch.ingest({ conversationId: CID, updateKey: 'telegram:0', sender: { id: 'u1' }, text: 'hi' });
    await redis.del(conversationKeys(prefix, CID).active);
    const once = await schedules.create(CID, { in: '1h', prompt: 'a' }, { createdBy: 'agent' });
    const every = await schedules.create(CID, { every: '1h', prompt: 'b' }, { createdBy: 'agent' });
    const r = await withSchedules().run(deps(), { name: 'purge', args: '' }, source(9), undefined);
    expect(r.reply).toMatch(/^Deleted this conversation: its messages, runs, state, schedules/);
    expect(await redis.exists(conversationKeys(prefix, CID).schedules)).toBe(0);
    expect(await schedules.queue.getJob(onceJobId(once.id))).toBeUndefined();
    expect(await schedules.queue.getJobScheduler(every.id)).toBeUndefined();
  });
});

/** A hand-made run context with the conversation's schedules, as the runtime binds them. */
function context(): RunContext {
  return {
    run: { id: 'run-1', conversationId: CID, attempt: 1 },
    agent: {},
    history: [],
    logger: pino({ level: 'silent' }),
    stop: { signal: new AbortController().signal, requested: () => undefined },
    features: {
      schedules: {
        create: (request: ScheduleRequest, opts?: { idempotencyKey?: string }) =>
          schedules.create(CID, request, { createdBy: 'agent', ...(opts?.idempotencyKey !== undefined && { id: scheduleIdFor(opts.idempotencyKey) }) }),
        list: (count?: number) => schedules.list(CID, count),
        cancel: (id: string) => schedules.cancel(CID, id),
      },
    },
  } as unknown as RunContext;
}

const call = { runId: 'run-1', conversationId: CID, callId: 'c1', attempt: 1, idempotencyKey: 'run-1:c1', rerun: false };

describe('the schedule tools', () => {
  it('create validates, echoes the next fires, and a re-run of the call makes no second schedule', async () => {
    const [create, list, cancel] = scheduleTools(context());
    const signal = new AbortController().signal;
    const bad = await create!.execute({ prompt: 'x', at: 'tomorrow at 9' }, { signal, call }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ToolFailure);
    expect((bad as ToolFailure).category).toBe('invalid_input');
    expect((bad as Error).message).toMatch(/^at: expected an ISO time with an offset/);

    const made = (await create!.execute({ prompt: 'Call Anna.', cron: '0 9 * * *', tz: 'Europe/Paris' }, { signal, call })) as {
      created: { id: string; when: string; next: string[] };
    };
    expect(made.created.when).toBe('cron 0 9 * * * (Europe/Paris)');
    expect(made.created.next).toHaveLength(3);
    expect(new Date(made.created.next[0]!).getTime()).toBeGreaterThan(Date.now());
    const rerun = (await create!.execute({ prompt: 'Call Anna.', cron: '0 9 * * *', tz: 'Europe/Paris' }, { signal, call: { ...call, rerun: true } })) as {
      created: { id: string };
    };
    expect(rerun.created.id).toBe(made.created.id);
    expect(await redis.hlen(conversationKeys(prefix, CID).schedules)).toBe(1);

    const listed = (await list!.execute({}, { signal })) as { schedules: Array<{ id: string; next: string[] }> };
    expect(listed.schedules.map((s) => s.id)).toEqual([made.created.id]);
    expect(await cancel!.execute({ id: made.created.id }, { signal })).toEqual({ cancelled: made.created.id });
    await expect(cancel!.execute({ id: made.created.id }, { signal })).rejects.toThrow(/no schedule/);
  });

  it('past the per-conversation limit, the model gets a clear error', async () => {
    const [create] = scheduleTools(context());
    const signal = new AbortController().signal;
    await create!.execute({ prompt: 'a', in: '1h' }, { signal, call: { ...call, idempotencyKey: 'k1' } });
    await create!.execute({ prompt: 'b', in: '2h' }, { signal, call: { ...call, idempotencyKey: 'k2' } });
    const err = await create!.execute({ prompt: 'c', in: '3h' }, { signal, call: { ...call, idempotencyKey: 'k3' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolFailure);
    expect((err as Error).message).toBe('the conversation has 2 schedules, the most allowed is 2: cancel one first');
  });

  it('are not offered without schedules, and the tool policy can deny them', async () => {
    expect(scheduleTools({ ...context(), features: {} })).toEqual([]);
    const ctx = context();
    const set = await new Toolbox({ policy: { tools: { schedule_create: 'deny' } } }).toolSet(ctx, scheduleTools(ctx));
    expect(Object.keys(set).sort()).toEqual(['schedule_cancel', 'schedule_list']);
  });
});
