/**
 * End to end through the whole system: events pushed over the fake's long
 * connection to the real SDK's WSClient (or POSTed as encrypted, signed
 * http-mode callbacks) → the real Feishu plugin → the real channel host →
 * Redis → BullMQ → the runner with the local agent (real OpenAI-compatible
 * provider, fake model) → delivery → the plugin's outbound → the real SDK
 * client → the fake open platform.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import feishuDefinition from '../../plugins/feishu/index.js';
import { p2pKey } from '../../plugins/feishu/keys.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolboxOptions } from '../../plugins/local-agent/toolbox.js';
import { declaredConversationKeys } from '../../src/plugin/storage.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import {
  FEISHU_ANN,
  FEISHU_BOB,
  FEISHU_DM,
  FEISHU_GROUP,
  feishuCardAction,
  feishuMessageEvent,
  postFeishuCallback,
} from '../../testing/fakes/feishu-events.js';
import { type FakeFeishu, type FeishuSentMessage, startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, gatedTool, RunnerHarness, refundTool, waitFor } from '../runner/harness.js';
import { type FeishuSystem, startFeishuSystem } from './feishu-harness.js';

const DM_CONVERSATION = `feishu:${FEISHU_DM}`;

let ai: FakeOpenAIServer;
let feishu: FakeFeishu;
let h: RunnerHarness;
let system: FeishuSystem | undefined;
let lookup: ReturnType<typeof gatedTool>;
let refunds: number[];

const refund = refundTool((amount) => refunds.push(amount));

async function boot(opts: { toolbox?: ToolboxOptions; config?: Parameters<typeof startFeishuSystem>[0]['config']; fetch?: typeof fetch } = {}): Promise<void> {
  system = await startFeishuSystem({
    h,
    feishu,
    agent: createLocalAgentPlugin({
      model: fakeModel(ai.url),
      tools: [lookup.tool, refund],
      builtins: { currentTime: false, askUser: true },
      ...(opts.toolbox && { toolbox: opts.toolbox }),
    }),
    ...(opts.config && { config: opts.config }),
    ...(opts.fetch && { fetch: opts.fetch }),
  });
  if ((opts.config?.mode ?? 'ws') === 'ws') await feishu.connected();
}

beforeEach(async () => {
  ai = await startFakeOpenAI();
  feishu = await startFakeFeishu();
  h = await RunnerHarness.start();
  lookup = gatedTool();
  refunds = [];
  system = undefined;
});

afterEach(async () => {
  await system?.plugin.stop();
  await system?.http.close();
  await h.close();
  await feishu.close();
  await ai.close();
});

/** Ann's text message in the one-to-one chat. */
const fromAnn = (text: string, over: Parameters<typeof feishuMessageEvent>[0] = { text }) => feishuMessageEvent({ ...over, text });
/** The bot's n-th message (1-based). */
const nth = (n: number, what: string) => feishu.waitUntil(() => feishu.sent[n - 1], 15_000, what) as Promise<FeishuSentMessage>;
const texts = () => feishu.sent.map((m) => m.text);
const conversationKeys = () => h.redis.keys(`${h.prefix}:{c:*`);
const approvalIdIn = (text: string) => /\/approve (ap_[0-9a-f]{24})/.exec(text)?.[1] ?? '';

describe('feishu end to end (long connection)', () => {
  it('answers a message over the long connection, acknowledging the event', async () => {
    await boot();
    ai.script([{ text: 'Hello Ann, how can I help?' }]);
    expect(await feishu.push(fromAnn('hi there'))).toMatchObject({ code: 200 });
    expect(await nth(1, 'the reply')).toMatchObject({ chatId: FEISHU_DM, msgType: 'text', text: 'Hello Ann, how can I help?' });
    expect(feishu.tokensIssued).toBe(1);
  });

  it('gives one reply to an event delivered three times', async () => {
    await boot();
    ai.script([{ text: 'Only once.' }]);
    const event = fromAnn('are you there?');
    for (let i = 0; i < 3; i++) expect((await feishu.push(event)).code).toBe(200);
    await nth(1, 'the reply');
    await h.idle(15_000, DM_CONVERSATION);
    expect(texts()).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', DM_CONVERSATION)).toHaveLength(1);
  });

  it('answers in a group only when the bot is mentioned', async () => {
    await boot();
    ai.script([{ text: 'Hello group.' }]);
    expect(await feishu.push(feishuMessageEvent({ text: 'talking among ourselves', chatType: 'group', mentionBot: false }))).toMatchObject({
      code: 200,
      data: { ignored: 'not-addressed' },
    });
    await feishu.push(feishuMessageEvent({ text: 'hi bot', chatType: 'group' }));
    expect(await nth(1, 'the reply')).toMatchObject({ chatId: FEISHU_GROUP, text: 'Hello group.' });
    await h.idle(15_000, `feishu:${FEISHU_GROUP}`);
    expect((await h.entries('message.received', `feishu:${FEISHU_GROUP}`)).map((e) => e.text)).toEqual(['hi bot']);
  });

  it('mentions nobody with a reply injected text wrote mentions into: no one in the group is notified, the tags show as written', async () => {
    await boot();
    // A page the agent read told it to "remind everyone": Feishu reads these tags in a text message as @everyone and @Bob.
    const reply = `Reminder <at user_id="all"></at> and <at user_id="${FEISHU_BOB}">Bob</at>: the deadline moved.`;
    ai.script([{ text: reply }]);
    await feishu.push(feishuMessageEvent({ text: 'summarise the page I linked', chatType: 'group' }));
    const sent = await nth(1, 'the reply');
    expect(sent).toMatchObject({ chatId: FEISHU_GROUP, msgType: 'text', mentions: [] });
    expect(sent.text.replaceAll('\u200B', '')).toBe(reply);
  });

  it("counts a card click as a group's unless a message said the chat is one-to-one: a member's /new button in a group is refused, Ann's in her chat runs", async () => {
    await boot();
    ai.script([{ text: 'Hello group.' }, { text: 'Hello Ann.' }]);
    await feishu.push(feishuMessageEvent({ text: 'hi bot', chatType: 'group' }));
    await nth(1, 'the group reply');
    await h.idle(15_000, `feishu:${FEISHU_GROUP}`);
    // A click names its chat, not the chat's kind: Bob's /new in the group is a group-wide command he is no admin for.
    const inGroup = await feishu.push(feishuCardAction({ messageId: 'om_card1', chatId: FEISHU_GROUP, operator: FEISHU_BOB, value: { command: '/new' } }));
    expect(inGroup.data).toEqual({ toast: { type: 'info', content: 'Only admins can use /new here.' } });
    expect(await h.entries('conversation.reset', `feishu:${FEISHU_GROUP}`)).toEqual([]);
    // A chat the bot never heard from counts as a group too.
    const unknown = await feishu.push(feishuCardAction({ messageId: 'om_card2', chatId: 'oc_unheard', operator: FEISHU_BOB, value: { command: '/new' } }));
    expect(unknown.data).toEqual({ toast: { type: 'info', content: 'Only admins can use /new here.' } });

    await feishu.push(fromAnn('hello'));
    await nth(2, "Ann's reply");
    await h.idle(15_000, DM_CONVERSATION);
    const inDm = await feishu.push(feishuCardAction({ messageId: 'om_card3', chatId: FEISHU_DM, operator: FEISHU_ANN, value: { command: '/new' } }));
    expect(inDm.data.toast.content).not.toMatch(/Only admins/);
    expect(await h.entries('conversation.reset', DM_CONVERSATION)).toHaveLength(1);
  });

  it('notes a one-to-one chat for its clicks only while the conversation keeps anything: a message after /purge notes nothing', async () => {
    await boot();
    ai.script([{ text: 'Hello Ann.' }]);
    await feishu.push(fromAnn('hello'));
    await nth(1, "Ann's reply");
    await h.idle(15_000, DM_CONVERSATION);
    const noted = p2pKey(h.prefix, DM_CONVERSATION);
    expect(await h.redis.exists(noted)).toBe(1);
    expect(await purgeConversation(h.redis, h.prefix, DM_CONVERSATION, { pluginKeys: declaredConversationKeys([feishuDefinition]) })).toMatchObject({
      kind: 'purged',
    });
    expect(await h.redis.exists(noted)).toBe(0);
    // The tombstone refuses the next message, and nothing of the conversation is written again.
    await feishu.push(fromAnn('are you there?'));
    expect(await h.entries('message.received', DM_CONVERSATION)).toEqual([]);
    expect(await h.redis.exists(noted)).toBe(0);
  });

  it('steers a message sent while the agent runs a tool into the same run', async () => {
    await boot();
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Schedule, weekend included.' }] satisfies FakeTurn[]);
    await feishu.push(fromAnn('look up the schedule'));
    await lookup.started;
    await feishu.push(fromAnn('also the weekend please'));
    const [steered] = await waitFor(
      async () => {
        const e = await h.entries('steering.queued', DM_CONVERSATION);
        return e.length > 0 && e;
      },
      15_000,
      'steering.queued',
    );
    lookup.release('SCHEDULE');
    await h.idle(15_000, DM_CONVERSATION);
    expect(ai.requests).toHaveLength(2);
    const users = ai.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);
    expect(users).toEqual(['look up the schedule', 'also the weekend please']);
    expect(texts()).toEqual(['Schedule, weekend included.']);
    expect((await h.entries('run.started', DM_CONVERSATION)).map((e) => e.run)).toEqual([steered!.run]);
  });

  it('waits out a 429 and its x-ogw-ratelimit-reset, then sends the reply once under the same uuid', async () => {
    await boot();
    feishu.failNext({ status: 429, resetSeconds: 1 });
    ai.script([{ text: 'After the limit.' }]);
    await feishu.push(fromAnn('hello'));
    await nth(1, 'the reply');
    await h.idle(15_000, DM_CONVERSATION);
    expect(feishu.calls.map((c) => c.status)).toEqual([429, 200]);
    expect(feishu.calls[1]!.uuid).toBe(feishu.calls[0]!.uuid);
    expect(texts()).toEqual(['After the limit.']);
  });

  it('splits a reply longer than 8000 characters into messages within the limit, nothing lost', async () => {
    await boot();
    const words = Array.from({ length: 3500 }, (_, i) => `word${i}`);
    const long = words.join(' ');
    expect(long.length).toBeGreaterThan(16_000);
    ai.script([{ text: long }]);
    await feishu.push(fromAnn('tell me everything'));
    await feishu.waitUntil(() => texts().join(' ').split(/\s+/).length >= words.length && true, 15_000, 'every part');
    await h.idle(15_000, DM_CONVERSATION);
    expect(feishu.sent.length).toBeGreaterThanOrEqual(3);
    for (const t of texts()) expect(t.length).toBeLessThanOrEqual(8000);
    expect(texts().join(' ').split(/\s+/)).toEqual(words);
  });

  it('answers in a thread with a reply in the thread to its root', async () => {
    await boot();
    ai.script([{ text: 'In the thread.' }]);
    const thread = { threadId: 'omt_thread1', rootId: 'om_root1' };
    feishu.rememberMessage(feishuMessageEvent({ text: 'root', chatType: 'group', messageId: thread.rootId }));
    await feishu.push(feishuMessageEvent({ text: 'and in the thread', chatType: 'group', thread }));
    expect(await nth(1, 'the reply')).toMatchObject({ chatId: FEISHU_GROUP, replyTo: 'om_root1', inThread: true, text: 'In the thread.' });
    expect(await h.entries('message.received', `feishu:${FEISHU_GROUP}:om_root1`)).toHaveLength(1);
  });

  it('talks to open.larksuite.com when the domain is lark', async () => {
    const hosts: string[] = [];
    const toFake: typeof fetch = (input, init) => {
      const url = new URL(String(input));
      hosts.push(url.host);
      return fetch(`${feishu.url}${url.pathname}${url.search}`, init);
    };
    await boot({ config: { domain: 'lark' }, fetch: toFake });
    ai.script([{ text: 'Hello from Lark.' }]);
    await feishu.push(fromAnn('hi'));
    expect((await nth(1, 'the reply')).text).toBe('Hello from Lark.');
    expect(hosts.length).toBeGreaterThanOrEqual(4);
    expect(new Set(hosts)).toEqual(new Set(['open.larksuite.com']));
  });
});

describe('feishu end to end (http callbacks)', () => {
  const httpMode = { config: { mode: 'http' as const } };

  it('answers the URL verification with its challenge, then a message callback with a reply', async () => {
    await boot(httpMode);
    const url = (system as FeishuSystem).url;
    const challenge = await postFeishuCallback(
      url,
      { type: 'url_verification', challenge: 'ch-123', token: 'fake-feishu-verification-token' },
      { headers: {} },
    );
    expect(challenge).toEqual({ status: 200, body: { challenge: 'ch-123' } });
    ai.script([{ text: 'Hello over http.' }]);
    const event = fromAnn('hi over http');
    feishu.rememberMessage(event);
    expect((await postFeishuCallback(url, event)).status).toBe(200);
    expect(await nth(1, 'the reply')).toMatchObject({ chatId: FEISHU_DM, text: 'Hello over http.' });
  });

  it('refuses a callback with a bad signature or token (401) or a malformed body (400): no turn, nothing written', async () => {
    await boot(httpMode);
    const url = (system as FeishuSystem).url;
    const event = fromAnn('forged');
    expect((await postFeishuCallback(url, event, { encryptKey: 'not-the-encrypt-key-0000' })).status).toBe(401);
    expect((await postFeishuCallback(url, event, { headers: {} })).status).toBe(401);
    expect((await postFeishuCallback(url, feishuMessageEvent({ text: 'x' }, 'not-the-token'))).status).toBe(401);
    expect((await postFeishuCallback(url, '{"encrypt": "bm90IGEgY2lwaGVy"}', { plain: true })).status).toBe(400);
    expect(
      (
        await postFeishuCallback(url, {
          schema: '2.0',
          header: { event_id: 'e1', event_type: 'im.message.receive_v1', token: 'fake-feishu-verification-token' },
          event: { message: 42 },
        })
      ).status,
    ).toBe(400);
    expect(await conversationKeys()).toEqual([]);
    expect(ai.requests).toEqual([]);
    expect(feishu.calls).toEqual([]);
  });

  it('refuses a replayed callback whose signed timestamp is outside the window, writing nothing', async () => {
    await boot(httpMode);
    const old = Math.floor(Date.now() / 1000) - 3600;
    const res = await postFeishuCallback((system as FeishuSystem).url, fromAnn('replayed'), { timestampSeconds: old });
    expect(res.status).toBe(401);
    expect(res.body.error).toMatch(/too far from now/);
    expect(await conversationKeys()).toEqual([]);
  });
});

describe('feishu approvals', () => {
  const policy: ToolboxOptions = { policy: { tools: { refund: 'require_approval' } } };

  it("shows Approve / Deny on a card; the requester's click over the long connection runs the tool once and replaces the card", async () => {
    await boot({ toolbox: policy });
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 40 } }] }, { text: 'Refunded 40.' }]);
    await feishu.push(fromAnn('refund 40'));
    const request = await nth(1, 'the approval request');
    const id = approvalIdIn(request.text);
    expect(request.msgType).toBe('interactive');
    expect(request.buttons.map((b) => [b.label, b.value.command])).toEqual([
      ['Approve', `/approve ${id}`],
      ['Deny', `/deny ${id}`],
    ]);
    const ack = await feishu.push(feishuCardAction({ messageId: request.id, chatId: FEISHU_DM, operator: FEISHU_ANN, value: request.buttons[0]!.value }));
    expect(ack.data).toMatchObject({ toast: { content: 'Approved: refund will run.' } });
    expect(JSON.stringify(ack.data.card)).toContain('Approved by');
    expect((await nth(2, 'the answer')).text).toBe('Refunded 40.');
    expect(refunds).toEqual([40]);
  });

  it("does not count a stranger's click: the approval stays undecided and the tool does not run", async () => {
    await boot({ toolbox: { policy: { tools: { refund: 'require_approval' }, approvalTimeoutMs: 1500 } } });
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 5 } }] }, { text: 'Nobody approved it.' }]);
    await feishu.push(fromAnn('refund 5'));
    const request = await nth(1, 'the approval request');
    const ack = await feishu.push(feishuCardAction({ messageId: request.id, chatId: FEISHU_DM, operator: FEISHU_BOB, value: request.buttons[0]!.value }));
    expect(ack.data).toEqual({ toast: { type: 'info', content: 'You are not allowed to decide this request. Nothing changed.' } });
    expect((await nth(2, 'the answer')).text).toBe('Nobody approved it.');
    expect(refunds).toEqual([]);
  });
});

describe('feishu ask_user', () => {
  const ASK = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };

  it("shows the options as card buttons; a stranger's click is refused, the asker's is the answer and replaces the card", async () => {
    await boot();
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: 'Team plan booked.' }]);
    await feishu.push(fromAnn('book me a plan'));
    const q = await nth(1, 'the question');
    const id = /\/choose (qu_[0-9a-f]{24}) 1/.exec(q.buttons[0]?.value.command ?? '')?.[1];
    expect(q.buttons.map((b) => [b.label, b.value.command])).toEqual(ASK.options.map((o, i) => [o, `/choose ${id} ${i + 1}`]));
    const click = (operator: string, n: number) =>
      feishu.push(feishuCardAction({ messageId: q.id, chatId: FEISHU_DM, operator, value: q.buttons[n - 1]!.value }));

    expect((await click(FEISHU_BOB, 1)).data).toEqual({
      toast: { type: 'info', content: 'Only the person the question was asked of may choose. Nothing changed.' },
    });
    const chosen = await click(FEISHU_ANN, 3);
    expect(chosen.data.toast.content).toBe('Chosen: Team');
    expect(JSON.stringify(chosen.data.card)).toContain('Team (chosen by');
    expect((await nth(2, 'the answer')).text).toBe('Team plan booked.');
    await h.idle(15_000, DM_CONVERSATION);
    expect(feishu.sent).toHaveLength(2);
  });
});
