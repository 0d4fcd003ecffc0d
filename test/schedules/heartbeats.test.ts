/**
 * Heartbeats from the configuration against a real Redis and real BullMQ: a
 * changed or removed setting cancels the heartbeat it made (when the new one
 * is made, else at the old one's next fire), and an unchanged setting keeps
 * firing.
 */

import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import { bullPrefixFor, type RunQueue } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import { HeartbeatKeeper, type HeartbeatSettings, heartbeatId } from '../../src/schedules/heartbeats.js';
import { Schedules } from '../../src/schedules/schedules.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl, testPrefix } from '../helpers/redis.js';
import { bullConn, closeScheduleParts, openAccess, scheduleParts } from '../helpers/schedule-parts.js';
import { fakeModel } from '../runner/harness.js';

const CID = 'telegram:42';
const OLD: HeartbeatSettings = { everyMinutes: 30, prompt: 'anything broken?' };
const NEW: HeartbeatSettings = { everyMinutes: 30, prompt: 'anything broken or slow?' };
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

/** A process's heartbeats under a configuration (the process starts now). */
function keeper(settings: Record<string, HeartbeatSettings>, channelIds: string[] = []): HeartbeatKeeper {
  return new HeartbeatKeeper(schedules, settings, channelIds, logger);
}

/** The fire worker of a process whose configuration `heartbeats` holds, as the runner wires it. */
function startWorker(heartbeats: HeartbeatKeeper): ScheduleFireWorker {
  worker = new ScheduleFireWorker({
    schedules,
    dispatch,
    queue,
    client: redis,
    prefix,
    connection: bullConn(),
    bullPrefix: bullPrefixFor(prefix),
    access: openAccess(redis, prefix),
    isStaleHeartbeat: (s) => heartbeats.isStale(s),
    logger,
  });
  return worker;
}

/** The heartbeat `setting` made, ticking every second so a test sees its fires (the id is all staleness looks at). */
function armFast(setting: HeartbeatSettings): ReturnType<Schedules['create']> {
  return schedules.create(CID, { every: '1s', prompt: setting.prompt }, { createdBy: 'config', origin: 'heartbeat', id: heartbeatId(CID, setting) });
}

async function fireInputs(): Promise<Array<{ text: string; origin?: { kind: string; source: string } }>> {
  const entries = await readRange(redis, conversationKeys(prefix, CID).log);
  return entries.filter((e) => e.kind === 'message.received').map((e) => e as unknown as { text: string; origin?: { kind: string; source: string } });
}

describe('heartbeats', () => {
  it('a changed setting: making the new heartbeat cancels the old one (even at the cap), and the new one fires', async () => {
    await keeper({ [CID]: OLD }).ensure(CID);
    const others = await Promise.all(['1h', '2h'].map((i) => schedules.create(CID, { in: i, prompt: `reminder ${i}` }, { createdBy: 'agent' })));
    const updated = keeper({ [CID]: NEW });
    await updated.ensure(CID);
    const oldId = heartbeatId(CID, OLD);
    const newId = heartbeatId(CID, NEW);
    expect((await schedules.list(CID, 0)).map((s) => s.id).sort()).toEqual([newId, ...others.map((s) => s.id)].sort());
    expect(await schedules.queue.getJobScheduler(oldId)).toBeUndefined();
    const w = startWorker(updated);
    const fresh = (await schedules.get(CID, newId))!;
    expect(await w.handle({ conversationId: CID, scheduleId: newId, createdAt: fresh.createdAt }, Date.now())).toBe('ingested');
    expect((await fireInputs()).map((i) => [i.origin?.source, i.text])).toEqual([[newId, NEW.prompt]]);
  });

  it.each([
    { change: 'a changed channel-wide setting (no message since)', settings: { telegram: NEW } },
    { change: 'a removed setting', settings: {} },
  ])('$change: the old heartbeat is cancelled at its next fire, which ingests nothing', async ({ settings }) => {
    const old = await armFast(OLD);
    startWorker(keeper(settings, ['telegram']));
    await waitFor(async () => (await schedules.get(CID, old.id)) === undefined, 10_000, 'the stale heartbeat cancelled');
    expect(await schedules.queue.getJobScheduler(old.id)).toBeUndefined();
    expect(await fireInputs()).toEqual([]);
    expect(await schedules.list(CID, 0)).toEqual([]);
  });

  it('an unchanged setting keeps its heartbeat, which fires as before', async () => {
    const hb = await armFast(OLD);
    const same = keeper({ telegram: OLD }, ['telegram']);
    await same.ensure(CID);
    startWorker(same);
    const inputs = await waitFor(async () => ((await fireInputs()).length > 0 ? fireInputs() : undefined), 10_000, 'a heartbeat fire');
    expect(inputs[0]).toMatchObject({ text: OLD.prompt, origin: { kind: 'heartbeat', source: hb.id } });
    expect((await schedules.list(CID, 0)).map((s) => [s.id, s.createdAt])).toEqual([[hb.id, hb.createdAt]]);
  });

  it('mid-deploy, a process with the older configuration leaves the heartbeat a newer one made', async () => {
    const older = keeper({ [CID]: OLD });
    const started = Date.now();
    await waitFor(() => Date.now() > started, 1000, 'the clock to move past the older process start');
    const newer = keeper({ [CID]: NEW });
    await newer.ensure(CID);
    const fresh = (await schedules.get(CID, heartbeatId(CID, NEW)))!;
    // The older process meets the conversation for the first time: it makes its heartbeat, and cancels nothing newer.
    await older.ensure(CID);
    const w = startWorker(older);
    expect(await w.handle({ conversationId: CID, scheduleId: fresh.id, createdAt: fresh.createdAt }, Date.now())).toBe('ingested');
    expect((await schedules.list(CID, 0)).map((s) => s.id).sort()).toEqual([heartbeatId(CID, OLD), fresh.id].sort());
  });
});

describe('a runner', () => {
  it('cancels, at its fire, the heartbeat of a channel-wide setting that changed', async () => {
    const h = await RunnerHarness.start();
    const own = new Schedules({
      client: h.redis,
      prefix: h.prefix,
      connection: bullConn(),
      bullPrefix: bullPrefixFor(h.prefix),
      limits: { minIntervalSeconds: 1 },
    });
    try {
      const old = await own.create(CID, { every: '1s', prompt: OLD.prompt }, { createdBy: 'config', origin: 'heartbeat', id: heartbeatId(CID, OLD) });
      const config = { ...h.ctx.config, schedules: { ...h.ctx.config.schedules, heartbeats: { telegram: NEW } } };
      const telegram: ChannelPlugin = { id: 'telegram', outbound: h.outbound, start: async () => undefined, stop: async () => undefined };
      // No run is expected: the model's address answers nothing.
      const plugin = createLocalAgentPlugin({ model: fakeModel('http://127.0.0.1:9'), maxRetries: 0 });
      h.runners.push(
        await startRunner({ ...h.ctx, config }, { plugin, channels: [telegram], lockDurationMs: 2000, stalledIntervalMs: 500, features: runnerFeatures() }),
      );
      await waitFor(async () => (await own.get(CID, old.id)) === undefined, 10_000, 'the stale heartbeat cancelled by the runner');
      expect(await h.entries('message.received', CID)).toEqual([]);
    } finally {
      await own.close();
      await h.close();
    }
  });
});
