/**
 * `ask_user` end to end over Telegram: the webhook (real grammY plugin) → the
 * channel host → Redis → BullMQ → runner with the local agent (real
 * OpenAI-compatible provider, fake model) → the question in the chat (fake
 * Bot API) with one button per option → a click (the callback query answered,
 * the message edited to the choice) or a message written instead → the
 * answer arrives. Someone else in the chat cannot choose for the asker.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, callbackQueryUpdate, type FakeTelegram, messageUpdate, startFakeTelegram, type TgUser } from '../../testing/fakes/telegram-server.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from '../channels/telegram-harness.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

const SECRET = 'e2e_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;
const BOB: TgUser = { id: 2002, is_bot: false, first_name: 'Bob' };
const ASK = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;

beforeEach(async () => {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  h = await RunnerHarness.start();
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false, askUser: true } }),
  }));
});
afterEach(() => stopTelegramSystem({ plugin, http }, h, tg, ai));

const say = async (text: string, from: TgUser = ALICE) => expect(await postUpdate(http, SECRET, messageUpdate({ text, from, chatId: ALICE.id }))).toBe(200);
const nth = async (n: number, what: string) => (await tg.waitUntil(() => tg.sent.length >= n && tg.sent, 15_000, what))[n - 1]!;
const toolResult = (i: number) => JSON.parse(ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);

describe('ask_user over Telegram', () => {
  it('shows the options as buttons; a stranger’s click is refused, the asker’s is the answer and edits the question', async () => {
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: 'Team plan booked.' }]);
    await say('book me a plan');
    const q = await nth(1, 'the question');
    expect(q.text).toBe('Which plan?\n1. Basic\n2. Pro\n3. Team\nChoose one, or reply in your own words.');
    const id = /\/choose (qu_[0-9a-f]{24}) 1/.exec(q.buttons?.[0]?.data ?? '')?.[1];
    expect(q.buttons).toEqual(ASK.options.map((text, i) => ({ text, data: `/choose ${id} ${i + 1}` })));

    expect(await postUpdate(http, SECRET, callbackQueryUpdate({ data: `/choose ${id} 1`, message: q, from: BOB }))).toBe(200);
    await tg.waitUntil(() => tg.callbackAnswers.length >= 1, 15_000, 'the refusal');
    expect(tg.callbackAnswers[0]!.text).toBe('Only the person the question was asked of may choose. Nothing changed.');
    expect(tg.sent[0]!.buttons).toHaveLength(3);

    expect(await postUpdate(http, SECRET, callbackQueryUpdate({ data: `/choose ${id} 3`, message: q, from: ALICE }))).toBe(200);
    expect((await nth(2, 'the answer')).text).toBe('Team plan booked.');
    expect(toolResult(1)).toEqual({ answer: 'Team', option: 3, by: 'Alice Liddell' });
    expect(tg.callbackAnswers[1]!.text).toBe('Chosen: Team');
    expect(tg.sent[0]!.text).toContain('Team (chosen by Alice Liddell).');
    expect(tg.sent[0]!.buttons).toBeUndefined();
    await h.idle(15_000, CONVERSATION);
    expect(tg.sent).toHaveLength(2);
  });

  it('a message written instead of a click is the answer: it joins the run, which answers once', async () => {
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: 'Enterprise it is, then.' }]);
    await say('book me a plan');
    await nth(1, 'the question');
    await say('none of these, enterprise');
    expect((await nth(2, 'the answer')).text).toBe('Enterprise it is, then.');
    expect(toolResult(1)).toMatchObject({ answer: null });
    expect(JSON.stringify(ai.requests[1]!.body.messages.at(-1))).toContain('none of these, enterprise');
    await h.idle(15_000, CONVERSATION);
    expect(tg.sent).toHaveLength(2);
    expect(ai.requests).toHaveLength(2);
  });
});
