/**
 * A schedule spends its owner's budget and speaks in its chat at every fire,
 * so it must stop when its owner, or its group, loses access. End to end:
 * Telegram updates posted to the real webhook (real grammY client against the
 * fake Bot API), approvals through the real `/pair` command and access store,
 * the local agent on the real AI SDK provider against the fake model server,
 * fires handled by the runner's real BullMQ fire worker (a tick due in an hour
 * is made due now by promoting its delayed job).
 *
 * Attacks: an approved person has the agent make an hourly schedule, then is
 * unpaired; a listed person is taken off `users` and the host and runner
 * restart with that configuration; a listed group is taken off `groups`
 * likewise. Each time the schedule's next fire must make no model call and
 * send nothing, while a schedule of someone who still has access fires.
 */
import { type Job, QueueEvents } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { AccessStore } from '../../host/access/store.js';
import type { accessSchema } from '../../src/config/schema.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import type { FireResult, ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import type { ConfiguredSchedules } from '../../src/schedules/from-config.js';
import type { FireJobData } from '../../src/schedules/schedules.js';
import { ALICE, messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { startTelegramSystem, type TelegramSystem, userTextsOf } from './telegram-system.js';

const BOB: TgUser = { id: 1002, is_bot: false, first_name: 'Bob', username: 'bob' };
const ADMIN: TgUser = { id: 1009, is_bot: false, first_name: 'Ada', username: 'ada' };
const GROUP = -100_779;
const dm = (u: TgUser) => `telegram:${u.id}`;
const GROUP_CID = `telegram:${GROUP}`;
const PROMPT = 'Remind the user to stretch.';

type Sys = TelegramSystem & { scheduling: ConfiguredSchedules; fires: ScheduleFireWorker };
type Req = { messages: Array<{ role: string; content: unknown }> };

let sys: Sys | undefined;
let events: QueueEvents | undefined;
afterEach(async () => {
  await events?.close();
  events = undefined;
  await sys?.close();
  sys = undefined;
});

/** The system under `access`, schedules fired by the runner; the model makes an hourly schedule when asked, and answers its fires. */
async function start(access: z.input<typeof accessSchema>): Promise<Sys> {
  const s = await startTelegramSystem({ schedules: { heartbeats: {} }, access });
  s.model.script((req: Req) => {
    if (req.messages.at(-1)?.role === 'tool') return { text: 'Scheduled.' };
    if ((userTextsOf(req).at(-1) ?? '').includes(PROMPT)) return { text: 'Time to stretch.' };
    return { toolCalls: [{ name: 'schedule_create', args: { every: '1h', prompt: PROMPT } }] };
  });
  events = new QueueEvents(s.scheduling!.schedules.queue.name, {
    connection: s.h.ctx.connectRedis({ forBullmq: true, connectionName: 'test-fire-events' }),
    prefix: bullPrefixFor(s.h.prefix),
  });
  await events.waitUntilReady();
  return { ...s, scheduling: s.scheduling!, fires: s.fires! };
}

const textsIn = (s: Sys, chatId: number) => s.tg.sent.filter((m) => m.chatId === chatId).map((m) => m.text);
const accessStore = (s: Sys) => new AccessStore(s.h.redis, s.h.prefix, s.h.ctx.config.access, s.identities);

/** Approves `user` the way a person is: their message gets a pairing code, an admin sends `/pair <code>`. */
async function approveByCode(s: Sys, user: TgUser): Promise<void> {
  expect(await s.post(messageUpdate({ from: user, text: 'hello' }))).toBe(200);
  const notice = await waitFor(() => textsIn(s, user.id).find((t) => t.includes('pairing code is')), 15_000, `a pairing code for ${user.id}`);
  const code = /pairing code is (\S+) /.exec(notice)?.[1];
  expect(await s.post(messageUpdate({ from: ADMIN, text: `/pair ${code}` }))).toBe(200);
  await waitFor(async () => (await accessStore(s).isPaired(dm(user))) || undefined, 15_000, `${user.id} approved`);
}

/** `user` asks for an hourly reminder in `chatId`; resolves with the schedule the agent made. */
async function scheduleMade(s: Sys, user: TgUser, chatId: number): Promise<string> {
  const before = textsIn(s, chatId).length;
  expect(await s.post(messageUpdate({ from: user, chatId, text: 'remind me every hour to stretch' }))).toBe(200);
  await waitFor(() => textsIn(s, chatId).length > before && textsIn(s, chatId).includes('Scheduled.'), 15_000, `the schedule in ${chatId}`);
  const cid = chatId < 0 ? GROUP_CID : dm(user);
  const [made] = await s.scheduling.schedules.list(cid);
  expect(made).toMatchObject({ prompt: PROMPT, owner: dm(user) });
  return made!.id;
}

/** Makes the schedule's next tick (an hour ahead) due now; resolves with what the runner's fire worker did with it. */
async function fireNow(s: Sys, scheduleId: string): Promise<FireResult> {
  const queue = s.scheduling.schedules.queue;
  const job = await waitFor(
    async () => (await queue.getDelayed()).find((j: Job<FireJobData>) => j.data.scheduleId === scheduleId),
    15_000,
    `the next tick of ${scheduleId}`,
  );
  const finished = job.waitUntilFinished(events!, 15_000) as Promise<FireResult>;
  await job.promote();
  return finished;
}

/** Fires ingested into a conversation (inputs of origin `schedule`). */
const firesIn = async (s: Sys, cid: string) => (await s.h.entries('message.received', cid)).filter((m) => m.origin?.kind === 'schedule');

describe('a schedule whose owner lost access', () => {
  it('fires no more once its owner is unpaired: no model call, nothing sent; it is kept, and fires again once they are approved again', async () => {
    const s = (sys = await start({ channels: { telegram: { policy: 'pairing', admins: [String(ADMIN.id)] } } }));
    await approveByCode(s, ALICE);
    await approveByCode(s, BOB);
    const alices = await scheduleMade(s, ALICE, ALICE.id);
    const bobs = await scheduleMade(s, BOB, BOB.id);

    expect(await accessStore(s).unpair(dm(ALICE))).toBe(true);
    const requests = s.model.requests.length;
    const sentToAlice = textsIn(s, ALICE.id).length;
    expect(await fireNow(s, alices)).toBe('no-access');
    expect(s.model.requests).toHaveLength(requests);
    expect(textsIn(s, ALICE.id)).toHaveLength(sentToAlice);
    expect(await firesIn(s, dm(ALICE))).toEqual([]);
    // Skipped, not cancelled: the schedule and its next tick are still there.
    expect((await s.scheduling.schedules.list(dm(ALICE))).map((x) => x.id)).toEqual([alices]);

    // Control: a person still approved gets their fire answered.
    expect(await fireNow(s, bobs)).toBe('ingested');
    await waitFor(() => textsIn(s, BOB.id).includes('Time to stretch.'), 15_000, "Bob's reminder");

    // Approved again (by the operator): her next tick fires.
    await accessStore(s).pair(dm(ALICE));
    expect(await fireNow(s, alices)).toBe('ingested');
    await waitFor(() => textsIn(s, ALICE.id).includes('Time to stretch.'), 15_000, "Alice's reminder");
  });

  it('fires no more once its owner is taken off the allow-list and the host and runner restart with that configuration', async () => {
    const listed = (users: TgUser[]) => ({ channels: { telegram: { policy: 'allowlist' as const, users: users.map((u) => String(u.id)) } } });
    const s = (sys = await start(listed([ALICE, BOB])));
    const alices = await scheduleMade(s, ALICE, ALICE.id);
    const bobs = await scheduleMade(s, BOB, BOB.id);

    await s.restart({ access: listed([BOB]) });
    const requests = s.model.requests.length;
    const sentToAlice = textsIn(s, ALICE.id).length;
    expect(await fireNow(s, alices)).toBe('no-access');
    expect(s.model.requests).toHaveLength(requests);
    expect(textsIn(s, ALICE.id)).toHaveLength(sentToAlice);
    expect(await firesIn(s, dm(ALICE))).toEqual([]);

    expect(await fireNow(s, bobs)).toBe('ingested');
    await waitFor(() => textsIn(s, BOB.id).includes('Time to stretch.'), 15_000, "Bob's reminder");
  });

  it('fires no more in a group taken off the allowed groups, while its owner’s own schedule still fires', async () => {
    const allowed = (groups: number[]) => ({
      channels: { telegram: { policy: 'allowlist' as const, users: [String(ALICE.id)], groups: groups.map(String) } },
    });
    const s = (sys = await start(allowed([GROUP])));
    const inGroup = await scheduleMade(s, ALICE, GROUP);
    const own = await scheduleMade(s, ALICE, ALICE.id);

    await s.restart({ access: allowed([]) });
    const requests = s.model.requests.length;
    const sentToGroup = textsIn(s, GROUP).length;
    expect(await fireNow(s, inGroup)).toBe('no-access');
    expect(s.model.requests).toHaveLength(requests);
    expect(textsIn(s, GROUP)).toHaveLength(sentToGroup);
    expect(await firesIn(s, GROUP_CID)).toEqual([]);

    expect(await fireNow(s, own)).toBe('ingested');
    await waitFor(() => textsIn(s, ALICE.id).includes('Time to stretch.'), 15_000, "Alice's own reminder");
  });
});
