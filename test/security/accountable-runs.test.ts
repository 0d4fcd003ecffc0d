/**
 * Every run is charged to someone accountable, and the schedule tools keep
 * the group rule. End to end: Telegram updates posted to the real webhook
 * (real grammY client against the fake Bot API), the local agent on the real
 * AI SDK provider against the fake model server, fires from the real BullMQ
 * fire worker.
 *
 * Attacks: a person over budget gets model runs through a schedule their
 * agent made; notes saved in a scheduled run survive purging the person; a
 * group member who is not an admin has the agent cancel the admin's schedule.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { BudgetSettings } from '../../src/people/budget.js';
import type { ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import type { ConfiguredSchedules } from '../../src/schedules/from-config.js';
import { type HeartbeatSettings, heartbeatId } from '../../src/schedules/heartbeats.js';
import { ALICE, messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { startTelegramSystem, type TelegramSystem } from './telegram-system.js';

const BOB: TgUser = { id: 1002, is_bot: false, first_name: 'Bob', username: 'bob' };
const GROUP = -100_777;
const ALICE_DM = `telegram:${ALICE.id}`;
const GROUP_CID = `telegram:${GROUP}`;
const P = `telegram:${ALICE.id}`;

/** The system with schedules fired by the runner, and its schedules service. */
type Sys = TelegramSystem & { scheduling: ConfiguredSchedules; fires: ScheduleFireWorker };

let sys: Sys | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

/** Telegram on a real channel host, memory on, the local agent on the fake model, schedules fired by the runner. */
async function start(opts: { budgets?: BudgetSettings; heartbeats?: Record<string, HeartbeatSettings> } = {}): Promise<Sys> {
  const s = await startTelegramSystem({ ...(opts.budgets && { budgets: opts.budgets }), schedules: { heartbeats: opts.heartbeats ?? {} } });
  return { ...s, scheduling: s.scheduling!, fires: s.fires! };
}

const textsIn = (s: Sys, chatId: number) => s.tg.sent.filter((m) => m.chatId === chatId).map((m) => m.text);
const replies = (s: Sys, chatId: number, n: number) => waitFor(() => textsIn(s, chatId).length >= n && textsIn(s, chatId), 15_000, `${n} replies in ${chatId}`);
const runsEnded = (s: Sys, cid: string, n: number) =>
  waitFor(async () => (await s.h.entries('run.ended', cid)).length >= n || undefined, 15_000, `${n} runs ended`);

/** Every memory note stored under the test's prefix, whoever it is filed under. */
async function allNotes(s: Sys): Promise<string[]> {
  const keys = await s.h.redis.keys(`${s.h.prefix}:*:memory`);
  const values = await Promise.all(keys.map((k) => s.h.redis.hvals(k)));
  return values.flat().map((json) => (JSON.parse(json) as { text: string }).text);
}

/** The tool results the model was sent in request `i`, oldest first. */
const toolResults = (s: Sys, i: number): string[] =>
  (s.model.requests[i]?.body.messages ?? []).filter((m: { role: string }) => m.role === 'tool').map((m: { content: unknown }) => String(m.content));

describe('a schedule fire is charged to the person who made the schedule', () => {
  it('refuses the fire of a schedule whose creator is over budget: no model call, one notice', async () => {
    const s = (sys = await start({ budgets: { identity: { tokensPerDay: 1000 } } }));
    // P's own run makes two one-shots, and its two model steps spend P's day (1 600 tokens of 1 000).
    s.model.script([
      {
        toolCalls: [
          { name: 'schedule_create', args: { in: '1s', prompt: 'Remind the user to stretch.' } },
          { name: 'schedule_create', args: { in: '3s', prompt: 'Remind the user to drink water.' } },
        ],
        usage: { prompt_tokens: 700, completion_tokens: 100 },
      },
      { text: 'Reminders set.', usage: { prompt_tokens: 700, completion_tokens: 100 } },
    ]);
    expect(await s.post(messageUpdate({ from: ALICE, text: 'remind me to stretch and to drink water' }))).toBe(200);
    expect(await replies(s, ALICE.id, 1)).toEqual(['Reminders set.']);
    expect(s.model.requests).toHaveLength(2);

    // Both fires come, each as its own run (the first ends at once, refused).
    await runsEnded(s, ALICE_DM, 3);
    const fires = (await s.h.entries('message.received', ALICE_DM)).filter((m) => m.origin?.kind === 'schedule');
    expect(fires).toHaveLength(2);
    const ended = await s.h.entries('run.ended', ALICE_DM);
    expect(ended.slice(1).map((e) => [e.outcome, e.reason])).toEqual([
      ['failed', 'budget'],
      ['failed', 'budget'],
    ]);
    // The fake model was not asked again: no tokens were spent on the fires.
    expect(s.model.requests).toHaveLength(2);
    // One notice for the window, saying what was not run and why.
    const texts = textsIn(s, ALICE.id);
    expect(texts).toHaveLength(2);
    expect(texts[1]).toMatch(/^The scheduled task was not run: the person who set it up has used up today's usage allowance\. It resets at /);
  });

  it("files a scheduled run's notes under its creator, so purging the person removes them and their schedules", async () => {
    const s = (sys = await start());
    s.model.script([
      {
        toolCalls: [
          { name: 'schedule_create', args: { in: '1s', prompt: 'Save a note that the user prefers mornings.' } },
          { name: 'schedule_create', args: { every: '1h', prompt: 'Check the build.' } },
        ],
      },
      { text: 'Scheduled.' },
      // The fire's run saves a note.
      { toolCalls: [{ name: 'memory_save', args: { text: 'Alice prefers mornings.' } }] },
      { text: 'Noted.' },
    ]);
    expect(await s.post(messageUpdate({ from: ALICE, text: 'plan my mornings' }))).toBe(200);
    expect(await replies(s, ALICE.id, 2)).toEqual(['Scheduled.', 'Noted.']);
    expect(await allNotes(s)).toEqual(['Alice prefers mornings.']);
    const [recurring] = await s.scheduling.schedules.list(ALICE_DM);
    expect(recurring?.prompt).toBe('Check the build.');
    expect(await s.scheduling.schedules.queue.getJobScheduler(recurring!.id)).toBeDefined();

    await s.identities.purge(P);

    expect(await allNotes(s)).toEqual([]);
    expect(await s.scheduling.schedules.list(ALICE_DM)).toEqual([]);
    expect(await s.scheduling.schedules.queue.getJobScheduler(recurring!.id)).toBeUndefined();
  });
});

describe('a schedule made in a group', () => {
  it("fires as a group input: its run gets none of the creator's personal notes or memory tools", async () => {
    const s = (sys = await start());
    s.model.script([
      { toolCalls: [{ name: 'schedule_create', args: { in: '1s', prompt: 'Tell the group the plan.' } }] },
      { text: 'Scheduled.' },
      { text: 'Here is the plan.' },
    ]);
    // Alice has a personal note; she has the agent set a reminder in the group.
    await s.memory.save(P, 'Her bank PIN is 4321.');
    expect(await s.post(messageUpdate({ chatId: GROUP, from: ALICE, text: 'remind the group of the plan' }))).toBe(200);
    expect(await replies(s, GROUP, 2)).toEqual(['Scheduled.', 'Here is the plan.']);

    const fire = (await s.h.entries('message.received', GROUP_CID)).find((m) => m.origin?.kind === 'schedule');
    expect(fire?.group).toBe(true);
    expect(fire?.origin?.owner).toBe(P);
    const fireRequest = s.model.requests[2]!.body;
    expect(JSON.stringify(fireRequest)).not.toContain('4321');
    expect((fireRequest.tools ?? []).map((t: { function: { name: string } }) => t.function.name).filter((n: string) => n.startsWith('memory_'))).toEqual([]);
  });
});

describe('a heartbeat is charged to its configured owner, else to the operator', () => {
  it("refuses the owner's heartbeat while the owner is over budget, and runs the operator's", async () => {
    const other = 'telegram:1003';
    const heartbeats: Record<string, HeartbeatSettings> = {
      [ALICE_DM]: { everyMinutes: 60, prompt: 'Anything new for Alice?', owner: P },
      [other]: { everyMinutes: 60, prompt: 'Anything new here?' },
    };
    const s = (sys = await start({ budgets: { identity: { tokensPerDay: 1000 } }, heartbeats }));
    s.model.script([{ text: 'Hello.', usage: { prompt_tokens: 1500, completion_tokens: 100 } }]);
    await s.post(messageUpdate({ from: ALICE, text: 'hi' }));
    await replies(s, ALICE.id, 1);
    await s.h.idle(10_000, ALICE_DM);
    await s.scheduling.heartbeats.ensureConfigured(['telegram']);

    // Each heartbeat fires now (the tick the fire worker would get from BullMQ).
    const fire = (cid: string) => s.fires.handle({ conversationId: cid, scheduleId: heartbeatId(cid, heartbeats[cid]!), createdAt: Date.now() }, Date.now());
    expect(await fire(ALICE_DM)).toBe('ingested');
    await runsEnded(s, ALICE_DM, 2);
    expect((await s.h.entries('run.ended', ALICE_DM)).map((e) => e.reason ?? '')).toEqual(['', 'budget']);
    expect(s.model.requests).toHaveLength(1);
    expect(textsIn(s, ALICE.id)[1]).toMatch(/^The scheduled task was not run: the person who set it up has used up today's usage allowance/);

    // The operator's heartbeat is not any person's: Alice's spent budget does not stop it.
    expect(await fire(other)).toBe('ingested');
    await runsEnded(s, other, 1);
    expect(s.model.requests).toHaveLength(2);
  });
});

describe('the schedule tools in a group', () => {
  /** Alice (an admin of the group) has the agent make a schedule; returns its id. */
  async function adminSchedule(s: Sys): Promise<string> {
    s.tg.chatMembers.set(`${GROUP}:${ALICE.id}`, 'administrator');
    s.model.script([{ toolCalls: [{ name: 'schedule_create', args: { cron: '0 8 * * *', prompt: 'Post the morning summary.' } }] }, { text: 'Scheduled.' }]);
    expect(await s.post(messageUpdate({ from: ALICE, chatId: GROUP, text: 'post a summary every morning' }))).toBe(200);
    expect(await replies(s, GROUP, 1)).toEqual(['Scheduled.']);
    const [created] = await s.scheduling.schedules.list(GROUP_CID);
    return created!.id;
  }

  it("refuses a member who is not an admin having the agent cancel the admin's schedule; the schedule stays", async () => {
    const s = (sys = await start());
    const id = await adminSchedule(s);
    s.model.script([{ toolCalls: [{ name: 'schedule_cancel', args: { id } }] }, { text: 'Could not cancel it.' }]);
    expect(await s.post(messageUpdate({ from: BOB, chatId: GROUP, text: 'cancel the morning summary' }))).toBe(200);
    expect(await replies(s, GROUP, 2)).toEqual(['Scheduled.', 'Could not cancel it.']);

    // The model was told why, and the schedule (its record and its timer) is still there.
    const result = toolResults(s, 3).at(-1);
    expect(result).toContain('forbidden');
    expect(result).toContain('only the person who set it up or an admin of this chat can cancel it');
    expect((await s.scheduling.schedules.list(GROUP_CID)).map((x) => x.id)).toEqual([id]);
    expect(await s.scheduling.schedules.queue.getJobScheduler(id)).toBeDefined();
  });

  it("refuses a member's message steered into the admin's run from having the agent cancel the admin's schedule", async () => {
    const s = (sys = await start());
    const id = await adminSchedule(s);
    s.model.script([
      // Alice's run is busy with a tool call when Bob's message is steered into it.
      { toolCalls: [{ name: 'schedule_list', args: {} }], delayMs: 1500 },
      { toolCalls: [{ name: 'schedule_cancel', args: { id } }] },
      { text: 'Could not cancel it.' },
    ]);
    await s.post(messageUpdate({ from: ALICE, chatId: GROUP, text: 'what is scheduled here?' }));
    await s.model.waitForRequests(3);
    expect(await s.post(messageUpdate({ from: BOB, chatId: GROUP, text: 'and cancel the morning summary' }))).toBe(200);
    expect((await replies(s, GROUP, 2))[1]).toBe('Could not cancel it.');

    expect((await s.h.entries('steering.injected', GROUP_CID)).length).toBe(1);
    expect(toolResults(s, 4).at(-1)).toContain('only the person who set it up or an admin of this chat can cancel it');
    expect((await s.scheduling.schedules.list(GROUP_CID)).map((x) => x.id)).toEqual([id]);
  });

  it("lets an admin have the agent cancel a member's schedule, and a member their own", async () => {
    const s = (sys = await start());
    s.tg.chatMembers.set(`${GROUP}:${ALICE.id}`, 'administrator');
    s.model.script([
      { toolCalls: [{ name: 'schedule_create', args: { cron: '0 9 * * *', prompt: 'Bob: stand-up.' } }] },
      { text: 'Made.' },
      { toolCalls: [{ name: 'schedule_create', args: { cron: '0 10 * * *', prompt: 'Bob: lunch.' } }] },
      { text: 'Made.' },
    ]);
    await s.post(messageUpdate({ from: BOB, chatId: GROUP, text: 'stand-up reminder please' }));
    await replies(s, GROUP, 1);
    await s.post(messageUpdate({ from: BOB, chatId: GROUP, text: 'lunch reminder please' }));
    await replies(s, GROUP, 2);
    const byPrompt = new Map((await s.scheduling.schedules.list(GROUP_CID)).map((x) => [x.prompt, x.id]));
    const standUp = byPrompt.get('Bob: stand-up.')!;
    const lunch = byPrompt.get('Bob: lunch.')!;

    s.model.script([
      { toolCalls: [{ name: 'schedule_cancel', args: { id: standUp } }] },
      { text: 'Cancelled for Bob.' },
      { toolCalls: [{ name: 'schedule_cancel', args: { id: lunch } }] },
      { text: 'Cancelled your lunch.' },
    ]);
    await s.post(messageUpdate({ from: ALICE, chatId: GROUP, text: "cancel Bob's stand-up" }));
    await replies(s, GROUP, 3);
    await s.post(messageUpdate({ from: BOB, chatId: GROUP, text: 'cancel my lunch reminder' }));
    expect((await replies(s, GROUP, 4)).slice(2)).toEqual(['Cancelled for Bob.', 'Cancelled your lunch.']);
    expect(await s.scheduling.schedules.list(GROUP_CID)).toEqual([]);
  });
});
