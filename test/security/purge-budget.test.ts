/**
 * Whoever may `/purge` a chat (the admin of a group they made, a person in
 * their own chat) purges it once its budget is spent, to spend the budget
 * again. The purge deletes what was said, not the counters: the chat that
 * starts over is still refused until the window ends, and told so. End to
 * end: Telegram updates to the real webhook and host, the local agent on the
 * real provider against the fake model server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AfterPurge } from '../../src/protocol/retention.js';
import { ALICE, messageUpdate } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { startTelegramSystem, type TelegramSystem } from './telegram-system.js';

const GROUP = -100_991;
const GROUP_CID = `telegram:${GROUP}`;
const SPENT = /^This chat has used up today's usage allowance\. It resets at /;

let sys: TelegramSystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

const textsIn = (s: TelegramSystem) => s.tg.sent.filter((m) => m.chatId === GROUP).map((m) => m.text);
const replies = (s: TelegramSystem, n: number) => waitFor(() => textsIn(s).length >= n && textsIn(s), 15_000, `${n} replies in the group`);

describe('a group whose budget is spent', () => {
  it('is still refused, and told so, after its admin purges the chat to start over', async () => {
    const s = (sys = await startTelegramSystem({ budgets: { conversation: { tokensPerDay: 1000 } } }));
    // A purged chat takes new messages at once, as a new, empty conversation.
    Object.assign(s.h.dispatch.options, { afterPurge: 'restart' satisfies AfterPurge });
    // Alice made the group: Telegram calls her its creator, and she may /purge it.
    s.tg.chatMembers.set(`${GROUP}:${ALICE.id}`, 'creator');
    s.model.script([{ text: 'A long answer.', usage: { prompt_tokens: 5000, completion_tokens: 10 } }]);
    const say = async (text: string) => expect(await s.post(messageUpdate({ from: ALICE, chatId: GROUP, text }))).toBe(200);

    await say('tell me everything');
    expect(await replies(s, 1)).toEqual(['A long answer.']);
    await say('and more');
    expect((await replies(s, 2))[1]).toMatch(SPENT);

    await say('/purge');
    expect((await replies(s, 3))[2]).toMatch(/^Deleted this conversation/);
    await say('start over, then');
    // Refused again before the model is called, and the chat that started over hears why.
    expect((await replies(s, 4))[3]).toMatch(SPENT);
    const ended = await waitFor(async () => (await s.h.entries('run.ended', GROUP_CID)).map((e) => e.reason).join() || undefined, 15_000, 'run ended');
    expect(ended).toBe('budget');
    expect(s.model.requests).toHaveLength(1);
  });
});
