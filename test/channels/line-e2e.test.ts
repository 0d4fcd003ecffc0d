/**
 * End to end through the whole system: signed deliveries → the real LINE
 * plugin's webhook → the real channel host → Redis → BullMQ → the runner
 * with the local agent (real OpenAI-compatible provider, fake model) →
 * delivery → the plugin's outbound → the real `@line/bot-sdk` client → the
 * fake LINE API.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeLine, LINE_ALICE, LINE_GROUP, lineDelivery, lineTextEvent, postLineDelivery, startFakeLine } from '../../testing/fakes/line-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { startLineSystem } from './line-harness.js';

const CONVERSATION = `line:${LINE_ALICE}`;

let ai: FakeOpenAIServer;
let line: FakeLine;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let deliver: (payload: unknown) => Promise<number>;
let url: string;

beforeEach(async () => {
  ai = await startFakeOpenAI();
  line = await startFakeLine();
  h = await RunnerHarness.start();
  ({ http, plugin, deliver, url } = await startLineSystem({
    h,
    line,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false } }),
  }));
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await line.close();
  await ai.close();
});

/** A text event from Alice with a fresh reply token (valid at the fake). */
const fromAlice = (text: string, over: Parameters<typeof lineTextEvent>[0] = {}) =>
  lineDelivery(lineTextEvent({ text, replyToken: line.issueReplyToken(LINE_ALICE), ...over }));
const texts = () => line.sent.map((m) => m.text);
const nth = async (n: number, what: string) => (await line.waitUntil(() => line.sent.length >= n && line.sent, 15_000, what))[n - 1]!;
const kinds = () => line.calls.filter((c) => c.kind !== 'loading').map((c) => `${c.kind} ${c.status}`);
const conversationKeys = () => h.redis.keys(`${h.prefix}:{c:*`);

describe('line end to end', () => {
  it('answers a message with its reply token, showing the loading animation while the agent works', async () => {
    // The model takes a second: typing (LINE's loading animation) shows once a run has worked half a second.
    ai.script([{ text: 'Hello Alice, how can I help?', delayMs: 1000 }]);
    expect(await deliver(fromAlice('hi there'))).toBe(200);
    expect(await nth(1, 'the reply')).toMatchObject({ to: LINE_ALICE, via: 'reply', text: 'Hello Alice, how can I help?' });
    expect(line.loading).toContain(LINE_ALICE);
    expect(kinds()).toEqual(['reply 200']);
  });

  it('gives one reply to an event delivered three times', async () => {
    ai.script([{ text: 'Only once.' }]);
    const payload = fromAlice('are you there?');
    expect(await Promise.all([deliver(payload), deliver(payload), deliver(payload)])).toEqual([200, 200, 200]);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    expect(texts()).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', CONVERSATION)).toHaveLength(1);
  });

  it('refuses a delivery with a bad or missing signature (401) or a malformed body (400): no turn, nothing written', async () => {
    expect((await postLineDelivery(url, fromAlice('forged'), 'not-the-channel-secret-000000')).status).toBe(401);
    expect((await postLineDelivery(url, fromAlice('unsigned'), undefined, { 'content-type': 'application/json' })).status).toBe(401);
    expect((await postLineDelivery(url, fromAlice('garbled'), undefined, { 'x-line-signature': '!!not base64!!' })).status).toBe(401);
    const malformed = await postLineDelivery(url, { destination: 'U0', events: 'nope' });
    expect(malformed.status).toBe(400);
    expect(await conversationKeys()).toEqual([]);
    expect(ai.requests).toEqual([]);
    expect(line.calls).toEqual([]);
  });

  it("answers the console's Verify request (no events) with 200", async () => {
    expect(await deliver(lineDelivery())).toBe(200);
  });

  it('drops an event older than the replay window unanswered, writing nothing', async () => {
    const res = await postLineDelivery(url, fromAlice('replayed', { timestamp: Date.now() - 7 * 24 * 3600_000 }));
    expect(res).toMatchObject({ status: 200, body: { results: ['ignored:stale'] } });
    expect(await conversationKeys()).toEqual([]);
  });

  it('pushes the reply when the reply token is too old to use', async () => {
    ai.script([{ text: 'Pushed, the token had expired.' }]);
    // Two minutes old: inside the replay window, past the token's minute.
    expect(await deliver(fromAlice('slow webhook', { timestamp: Date.now() - 120_000 }))).toBe(200);
    expect(await nth(1, 'the reply')).toMatchObject({ to: LINE_ALICE, via: 'push', text: 'Pushed, the token had expired.' });
    await h.idle(15_000, CONVERSATION);
    expect(kinds()).toEqual(['push 200']);
  });

  it('keeps the newest reply token when a captured delivery is replayed within its minute', async () => {
    ai.script([{ text: 'First.' }, { text: 'Second, by reply.', delayMs: 1500 }]);
    const captured = fromAlice('first');
    expect(await deliver(captured)).toBe(200);
    await nth(1, 'the first reply');
    await h.idle(15_000, CONVERSATION);
    expect(await deliver(fromAlice('second'))).toBe(200);
    await ai.waitForRequests(2);
    // The replay lands while the second answer is written: its used token must not take the newer one's place.
    expect(await deliver(captured)).toBe(200);
    expect(await nth(2, 'the second reply')).toMatchObject({ via: 'reply', text: 'Second, by reply.' });
    await h.idle(15_000, CONVERSATION);
    expect(kinds()).toEqual(['reply 200', 'reply 200']);
  });

  it('pushes the reply when LINE refuses the reply token (expired or used)', async () => {
    ai.script([{ text: 'Pushed after the refusal.' }]);
    expect(await deliver(fromAlice('hello', { replyToken: 'a-token-the-fake-never-issued' }))).toBe(200);
    expect(await nth(1, 'the reply')).toMatchObject({ via: 'push', text: 'Pushed after the refusal.' });
    await h.idle(15_000, CONVERSATION);
    expect(kinds()).toEqual(['reply 400', 'push 200']);
    expect(texts()).toEqual(['Pushed after the refusal.']);
  });

  it('honours a rate limit: after a 429 with Retry-After the reply goes out once', async () => {
    ai.script([{ text: 'After the wait.' }]);
    line.failNext('reply', { status: 429, message: 'The API rate limit has been exceeded.', retryAfterSeconds: 1 });
    expect(await deliver(fromAlice('hello'))).toBe(200);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    // The token was taken by the refused reply (a token is single-use), so the retry is a push.
    expect(kinds()).toEqual(['reply 429', 'push 200']);
    expect(texts()).toEqual(['After the wait.']);
  });

  it('retries a push LINE failed with a 500 under the same X-Line-Retry-Key, and it arrives once', async () => {
    ai.script([{ text: 'Despite the outage.' }]);
    line.failNext('push', { status: 500, message: 'Internal server error' });
    expect(await deliver(fromAlice('hello', { timestamp: Date.now() - 120_000 }))).toBe(200);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    const pushes = line.calls.filter((c) => c.kind === 'push');
    expect(pushes.map((c) => c.status)).toEqual([500, 200]);
    expect(pushes[0]!.retryKey).toBeDefined();
    expect(pushes[1]!.retryKey).toBe(pushes[0]!.retryKey);
    expect(texts()).toEqual(['Despite the outage.']);
  });

  it('splits a reply longer than 5000 characters into messages within the limit, nothing lost', async () => {
    const words = Array.from({ length: 2200 }, (_, i) => `word${i}`);
    const long = words.join(' ');
    expect(long.length).toBeGreaterThan(10_000);
    ai.script([{ text: long }]);
    expect(await deliver(fromAlice('tell me everything'))).toBe(200);
    await line.waitUntil(() => texts().join(' ').split(/\s+/).length >= words.length && true, 15_000, 'every part');
    await h.idle(15_000, CONVERSATION);
    expect(line.sent.length).toBeGreaterThanOrEqual(3);
    for (const t of texts()) expect(t.length).toBeLessThanOrEqual(5000);
    expect(texts().join(' ').split(/\s+/)).toEqual(words);
    // The first part used the reply token, the rest went as pushes.
    expect(line.sent.map((m) => m.via)).toEqual(['reply', ...line.sent.slice(1).map(() => 'push')]);
  });

  it('answers in a group: the conversation is the group, no loading animation', async () => {
    ai.script([{ text: 'Hello group.' }]);
    const event = lineTextEvent({ text: 'hi all', groupId: LINE_GROUP, replyToken: line.issueReplyToken(LINE_GROUP) });
    expect(await deliver(lineDelivery(event))).toBe(200);
    expect(await nth(1, 'the reply')).toMatchObject({ to: LINE_GROUP, text: 'Hello group.' });
    await h.idle(15_000, `line:${LINE_GROUP}`);
    expect(line.loading).toEqual([]);
    expect(await h.entries('message.received', `line:${LINE_GROUP}`)).toHaveLength(1);
  });
});

describe('line outbound', () => {
  it('does not push a delivery twice: a repeated push with the same delivery key is the one LINE accepted (409)', async () => {
    const first = await plugin.outbound.send(CONVERSATION, 'exactly once', { deliveryKey: 'r1:3:0' });
    const again = await plugin.outbound.send(CONVERSATION, 'exactly once', { deliveryKey: 'r1:3:0', maybeSentSince: Date.now() - 1000 });
    expect(texts()).toEqual(['exactly once']);
    expect(line.calls.map((c) => c.status)).toEqual([200, 409]);
    expect(first.messageId).toBeTruthy();
    expect(again.messageId).toBeTruthy();
  });

  it('puts choices under the message as quick replies whose tap sends the command', async () => {
    await plugin.outbound.send(CONVERSATION, 'Run the refund?', {
      buttons: [
        { label: 'Approve', command: '/approve ap_1' },
        { label: 'Deny', command: '/deny ap_1' },
      ],
    });
    expect(line.sent[0]!.quickReplies).toEqual([
      { label: 'Approve', text: '/approve ap_1' },
      { label: 'Deny', text: '/deny ap_1' },
    ]);
  });
});
