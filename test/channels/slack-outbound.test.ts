/**
 * The Slack channel's outbound side, unstarted (as runners use it), with
 * the real Web API client against the fake Slack: Markdown as mrkdwn,
 * replies in the thread, rate limits as ChannelApiError with retryAfterMs,
 * a streamed reply edited in place through delivery, workspace admins, and
 * a resend after a runner died finding the reply by its delivery key.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { parseConversationId } from '../../plugins/slack/conversation.js';
import { markdownToMrkdwn } from '../../plugins/slack/mrkdwn.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { ChannelApiError, InvalidInputError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeSlack, SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const DM = 'slack:D0000DM1';
const THREAD = 'slack:C0000CH1:1700000001.000100';

let h: { fake: FakeSlack; redis: Redis; prefix: string; outbound: ChannelOutbound };
let runs = 0;

beforeEach(async () => {
  const fake = await startFakeSlack({ admins: ['U0000ADM'] });
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const plugin = createSlackPlugin(
    { botToken: SLACK_BOT_TOKEN, signingSecret: 'x'.repeat(32), apiUrl: fake.apiUrl, streamEditIntervalMs: 500 },
    { logger, redis, prefix },
  );
  h = { fake, redis, prefix, outbound: plugin.outbound };
});
afterEach(async () => {
  await h.fake.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
});

const delivery = (conversationId: string) =>
  new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId, runId: `run${++runs}`, resolve: () => h.outbound, logger });

describe('markdown to mrkdwn', () => {
  it('keeps a quote a quote', () => {
    expect(markdownToMrkdwn('> **said** a < b')).toBe('> *said* a &lt; b');
  });

  it('converts bold, italic, strike, links, headings and bullets, escapes &, < and >, and leaves code alone', () => {
    const md =
      '# Plan\n**bold** and *it* and ~~gone~~, see [docs](https://x.test/a?b=1&c=2)\n- one & <two>\n```ts\nconst a = 1 < 2 && **b**;\n```\nuse `**raw**`';
    expect(markdownToMrkdwn(md)).toBe(
      '*Plan*\n*bold* and _it_ and ~gone~, see <https://x.test/a?b=1&amp;c=2|docs>\n• one &amp; &lt;two&gt;\n```\nconst a = 1 &lt; 2 &amp;&amp; **b**;\n```\nuse `**raw**`',
    );
  });
  // A reply can repeat what a stranger wrote; each of these held the one thread for seconds before the rules were linear.
  it('renders crafted lines at once: a heading or bullet of spaces broken by a carriage return, a line of unclosed links', { timeout: 3000 }, () => {
    const spaces = ' '.repeat(60_000);
    expect(markdownToMrkdwn(`# ${spaces}\rx\ry`)).toBe('*x\ry*');
    expect(markdownToMrkdwn(`- ${spaces}\rx`)).toBe('• x');
    expect(markdownToMrkdwn('[a'.repeat(40_000))).toBe('[a'.repeat(40_000));
    expect(markdownToMrkdwn('[a](http://'.repeat(8000))).toBe('[a](http://'.repeat(8000));
    expect(markdownToMrkdwn('see [the docs](https://example.com/a) now')).toBe('see <https://example.com/a|the docs> now');
  });
});

describe('slack conversation ids', () => {
  it('reads a DM and a thread, and refuses anything else', () => {
    expect(parseConversationId('slack', DM)).toEqual({ channel: 'D0000DM1' });
    expect(parseConversationId('slack', THREAD)).toEqual({ channel: 'C0000CH1', threadTs: '1700000001.000100' });
    for (const bad of ['telegram:1', 'slack:', 'slack:c1', 'slack:C1:yesterday', 'slack:C1:1.2:3']) {
      expect(() => parseConversationId('slack', bad)).toThrow(InvalidInputError);
    }
  });
});

describe('slack outbound', () => {
  it('sends into the thread of a thread conversation, formatted when asked', async () => {
    const { messageId } = await h.outbound.send(THREAD, 'a **bold** reply', { format: 'markdown' });
    expect(h.fake.messages).toEqual([expect.objectContaining({ channel: 'C0000CH1', threadTs: '1700000001.000100', ts: messageId, text: 'a *bold* reply' })]);
    expect(h.fake.callsOf('chat.postMessage')[0]!.token).toBe(SLACK_BOT_TOKEN);
  });

  it('throws a 429 as ChannelApiError with retryAfterMs, and a platform error without the token', async () => {
    h.fake.failNext('chat.postMessage', { status: 429, retryAfter: 3 }, { error: 'channel_not_found' });
    const limited = await h.outbound.send(DM, 'x').catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(ChannelApiError);
    expect(limited).toMatchObject({ status: 429, retryAfterMs: 3000 });
    const refused = await h.outbound.send(DM, 'x').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ChannelApiError);
    expect((refused as Error).message).toBe('slack chat.postMessage failed: channel_not_found');
    expect(h.fake.callsOf('chat.postMessage')).toHaveLength(2);
  });

  it('streams a reply through delivery as one message edited in place, ending formatted like a whole send', async () => {
    const streamed = delivery(DM);
    streamed.delta('**Plan** so ');
    await waitFor(() => h.fake.messages.length >= 1, 10_000, 'the first part');
    streamed.delta('far');
    await streamed.message('**Plan** so far, and done.');
    expect(h.fake.messages).toHaveLength(1);
    expect(h.fake.messages[0]!.text).toBe('*Plan* so far, and done.');
    expect(h.fake.callsOf('chat.update').length).toBeGreaterThan(0);
  });

  it("asks users.info whether someone is an admin of the bot's workspace, and auth.test which workspace that is once", async () => {
    expect(await h.outbound.isAdmin!(THREAD, 'U0000ADM')).toBe(true);
    expect(await h.outbound.isAdmin!(THREAD, 'U0000ANN')).toBe(false);
    expect(await h.outbound.isAdmin!(THREAD, 'not an id')).toBe(false);
    expect(h.fake.callsOf('users.info')).toHaveLength(2);
    expect(h.fake.callsOf('auth.test')).toHaveLength(1);
  });
});

describe('slack outbound › a send an earlier attempt may have made', () => {
  const KEY = 'run9:4:0';
  const since = () => Date.now() - 1000;

  it('posts every reply with its delivery key in the message metadata', async () => {
    await h.outbound.send(DM, 'hello', { deliveryKey: KEY });
    expect(h.fake.messages[0]!.metadata).toEqual({ event_type: 'steerbot_delivery', event_payload: { key: KEY } });
  });

  it('answers the message a DM already shows under the key, found in the history, instead of posting again', async () => {
    const first = await h.outbound.send(DM, 'hello', { deliveryKey: KEY });
    await h.outbound.send(DM, 'a later reply', { deliveryKey: 'run9:4:1' });
    const again = await h.outbound.send(DM, 'hello', { deliveryKey: KEY, maybeSentSince: since() });
    expect(again).toEqual(first);
    expect(h.fake.textsIn('D0000DM1')).toEqual(['hello', 'a later reply']);
    expect(h.fake.callsOf('conversations.history').map((c) => c.payload)).toEqual([
      expect.objectContaining({ channel: 'D0000DM1', include_all_metadata: 'true', oldest: expect.any(String) }),
    ]);
    expect(h.fake.callsOf('chat.update')).toEqual([]);
  });

  it('looks in the thread of a thread conversation', async () => {
    const first = await h.outbound.send(THREAD, 'in the thread', { deliveryKey: KEY });
    expect(await h.outbound.send(THREAD, 'in the thread', { deliveryKey: KEY, maybeSentSince: since() })).toEqual(first);
    expect(h.fake.callsOf('conversations.replies').map((c) => c.payload)).toEqual([
      expect.objectContaining({ channel: 'C0000CH1', ts: '1700000001.000100', include_all_metadata: 'true' }),
    ]);
    expect(h.fake.messages).toHaveLength(1);
  });

  it('reads further pages, and posts when no message carries the key', async () => {
    for (let i = 0; i < 450; i++) await h.outbound.send(DM, `reply ${i}`, { deliveryKey: `run9:${i}:0` });
    const found = await h.outbound.send(DM, 'reply 3', { deliveryKey: 'run9:3:0', maybeSentSince: since() - 60_000 });
    expect(found.messageId).toBe(h.fake.messages[3]!.ts);
    expect(h.fake.callsOf('conversations.history')).toHaveLength(3);
    expect(h.fake.callsOf('chat.update')).toEqual([]);

    const posted = await h.outbound.send(DM, 'never sent', { deliveryKey: 'run8:1:0', maybeSentSince: since() });
    expect(h.fake.messages).toHaveLength(451);
    expect(posted.messageId).toBe(h.fake.messages[450]!.ts);
  });

  it('makes a message found under the key show the text (a streaming preview showed less)', async () => {
    const preview = await h.outbound.send(DM, 'Half an', { deliveryKey: KEY });
    const again = await h.outbound.send(DM, 'Half an **answer**, whole now.', { deliveryKey: KEY, maybeSentSince: since(), format: 'markdown' });
    expect(again).toEqual(preview);
    expect(h.fake.textsIn('D0000DM1')).toEqual(['Half an *answer*, whole now.']);
    expect(h.fake.callsOf('chat.update')[0]!.payload.metadata).toEqual({ event_type: 'steerbot_delivery', event_payload: { key: KEY } });
  });

  it('posts when Slack will not show the history (a missing scope), and throws a rate limit on it without posting', async () => {
    h.fake.failNext('conversations.history', { error: 'missing_scope' }, { status: 429, retryAfter: 2 });
    await h.outbound.send(DM, 'hello', { deliveryKey: KEY, maybeSentSince: since() });
    expect(h.fake.messages).toHaveLength(1);
    const limited = await h.outbound.send(DM, 'hello', { deliveryKey: KEY, maybeSentSince: since() }).catch((e: unknown) => e);
    expect(limited).toMatchObject({ status: 429, retryAfterMs: 2000 });
    expect(h.fake.messages).toHaveLength(1);
  });

  it('through delivery: a takeover finds the reply whose answer never reached the dead attempt, and acknowledges it', async () => {
    const held = h.fake.holdAnswer('chat.postMessage');
    const dead = new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId: DM, runId: 'runK', resolve: () => h.outbound, logger });
    dead.beginTurn(7);
    void dead.message('the answer');
    await held.done;
    const box = conversationKeys(h.prefix, DM).outbox;
    expect(JSON.parse((await h.redis.hget(box, 'runK:7:0'))!)).toEqual({ status: 'possibly-dispatched' });

    const takeover = new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId: DM, runId: 'runK', resolve: () => h.outbound, logger });
    takeover.beginTurn(7);
    await takeover.message('the answer');
    expect(h.fake.textsIn('D0000DM1')).toEqual(['the answer']);
    expect(JSON.parse((await h.redis.hget(box, 'runK:7:0'))!)).toEqual({ status: 'acknowledged', messageId: h.fake.messages[0]!.ts });
  });
});
