/**
 * Messages a Telegram user sends on behalf of a chat, black-box through the
 * real grammY plugin against the fake Bot API, the real channel host, BullMQ
 * and the local agent on a fake model. Telegram puts one placeholder user in
 * `from` of every such message in every group (@Channel_Bot for channels,
 * @GroupAnonymousBot for anonymous admins): a stranger posting as a channel
 * of their own must not pass for every other channel-poster (notes, budget,
 * rate limits, deciding their approvals); an anonymous admin is the group
 * itself, which is no admin of the group unless the operator lists it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import type { ChannelSettings } from '../../host/receive.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { callbackQueryUpdate, type FakeTelegram, messageUpdate, startFakeTelegram, type TgUser } from '../../testing/fakes/telegram-server.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from '../channels/telegram-harness.js';
import { fakeModel, RunnerHarness, refundTool } from '../runner/harness.js';

const SECRET = 'chat_senders_secret_0123456789';
const GROUP = -100777;
const GROUP_CID = `telegram:${GROUP}`;
/** The placeholder `from` of every message sent on behalf of a channel. */
const CHANNEL_BOT: TgUser = { id: 136817688, is_bot: true, first_name: 'Channel', username: 'Channel_Bot' };
/** The placeholder `from` of every anonymous group admin's message. */
const ANONYMOUS_BOT: TgUser = { id: 1087968824, is_bot: true, first_name: 'Group', username: 'GroupAnonymousBot' };
/** Alice's channel, and the one Mallory made to post as. */
const ALICE_CHANNEL = { id: -1001111, type: 'channel', title: 'Alice News' };
const MALLORY_CHANNEL = { id: -1002222, type: 'channel', title: 'Mallory News' };
/** The person behind Alice's channel, as a click shows her. */
const ALICE_USER: TgUser = { id: 1001, is_bot: false, first_name: 'Alice' };
const NOT_ALLOWED = 'You are not allowed to decide this request. Nothing changed.';

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let refunds: number[];

beforeEach(async () => {
  refunds = [];
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
});
afterEach(() => stopTelegramSystem({ plugin, http }, h, tg, ai));

/** Starts the system; every group message is answered (no mention needed); refunds need approval. */
async function boot(settings?: () => ChannelSettings): Promise<void> {
  h = await RunnerHarness.start();
  const refund = refundTool((amount) => refunds.push(amount));
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    telegram: { groups: 'always' },
    ...(settings && { settings }),
    agent: createLocalAgentPlugin({
      model: fakeModel(ai.url),
      tools: [refund],
      builtins: { currentTime: false },
      toolbox: { policy: { tools: { refund: 'require_approval' } } },
    }),
  }));
}

/** Posts `text` to the group on behalf of `chat` (`from`: Telegram's placeholder for it). */
async function postAs(chat: { id: number; type: string; title: string }, text: string, from = CHANNEL_BOT): Promise<void> {
  expect(await postUpdate(http, SECRET, messageUpdate({ chatId: GROUP, from, text, extra: { sender_chat: chat } }))).toBe(200);
}

/** The bot's messages in the group, once there are at least `n`. */
const groupMessages = (n: number, what: string) =>
  tg.waitUntil(() => tg.sent.filter((m) => m.chatId === GROUP).length >= n && tg.sent.filter((m) => m.chatId === GROUP), 15_000, what);

/** The senders of the group's `message.received` entries. */
async function senders(): Promise<Array<{ id: string; name?: string }>> {
  const record = await h.record(GROUP_CID);
  return record
    .filter((e): e is SeqEntry<MessageReceived> => e.kind === 'message.received')
    .map((e) => ({ id: e.sender.id, ...(e.sender.name && { name: e.sender.name }) }));
}

describe('messages sent on behalf of a chat', () => {
  it('two channels posting in one group are two senders, each named by its channel', async () => {
    ai.script([{ text: 'Hello Alice News.' }, { text: 'Hello Mallory News.' }]);
    await boot();
    await postAs(ALICE_CHANNEL, 'hello from Alice News');
    await groupMessages(1, 'the first answer');
    await h.idle(15_000, GROUP_CID);
    await postAs(MALLORY_CHANNEL, 'hello from Mallory News');
    await groupMessages(2, 'the second answer');
    expect(await senders()).toEqual([
      { id: `c${ALICE_CHANNEL.id}`, name: 'Alice News' },
      { id: `c${MALLORY_CHANNEL.id}`, name: 'Mallory News' },
    ]);
  });

  it("a channel-poster cannot decide an approval another channel-poster's run asked for", async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 12 } }] }, { text: 'Refunded 12.' }]);
    await boot();
    await postAs(ALICE_CHANNEL, 'refund my 12');
    const request = (await groupMessages(1, 'the approval request'))[0]!;
    const id = /\/approve (ap_[0-9a-f]{24})/.exec(request.text)![1]!;

    // Mallory, posting as her own channel, types it and clicks it; neither decides.
    await postAs(MALLORY_CHANNEL, `/approve ${id}`);
    expect((await groupMessages(2, 'the refusal'))[1]!.text).toBe(NOT_ALLOWED);
    expect(
      await postUpdate(
        http,
        SECRET,
        callbackQueryUpdate({ data: `/approve ${id}`, message: request, from: { id: 1666, is_bot: false, first_name: 'Mallory' } }),
      ),
    ).toBe(200);
    await tg.waitUntil(() => tg.callbackAnswers.length >= 1, 15_000, 'the answer to the click');
    expect(tg.callbackAnswers[0]!.text).toBe(NOT_ALLOWED);
    // A click is its user's, never a channel's: Alice's own click does not decide as her channel either.
    expect(await postUpdate(http, SECRET, callbackQueryUpdate({ data: `/approve ${id}`, message: request, from: ALICE_USER }))).toBe(200);
    await tg.waitUntil(() => tg.callbackAnswers.length >= 2, 15_000, "the answer to Alice's click");
    expect(tg.callbackAnswers[1]!.text).toBe(NOT_ALLOWED);
    expect(refunds).toEqual([]);

    // The channel that started the run decides.
    await postAs(ALICE_CHANNEL, `/approve ${id}`);
    const texts = (await groupMessages(4, 'the approval and the answer')).map((m) => m.text);
    expect(texts.slice(2)).toEqual(['Approved: refund will run.', 'Refunded 12.']);
    expect(refunds).toEqual([12]);
  });

  it("an anonymous admin's message is the group's own, an admin of that group only; a channel posting there is none", async () => {
    ai.script([{ text: 'Noted.' }]);
    await boot();
    const group = { id: GROUP, type: 'supergroup', title: 'Test group' };
    await postAs(group, 'note this', ANONYMOUS_BOT);
    await groupMessages(1, 'the answer');
    expect(await senders()).toEqual([{ id: `c${GROUP}`, name: 'Test group' }]);
    await h.idle(15_000, GROUP_CID);

    // Only the group's admins can write as the group itself: its group-wide commands are theirs, without asking Telegram.
    await postAs(group, '/stop', ANONYMOUS_BOT);
    expect((await groupMessages(2, 'the reply'))[1]!.text).toBe('Nothing to stop: no run is active.');
    // A channel writing in the group is not the group: refused, and Telegram is not asked about a user that is not one.
    await postAs(MALLORY_CHANNEL, '/stop', CHANNEL_BOT);
    expect((await groupMessages(3, 'the refusal'))[2]!.text).toBe('Only admins can use /stop here.');
    expect(tg.callsOf('getChatMember')).toEqual([]);
  });
});
