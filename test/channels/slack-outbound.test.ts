/**
 * The Slack channel's outbound side, unstarted (as runners use it), with
 * the real Web API client against the fake Slack: Markdown as mrkdwn,
 * replies in the thread, rate limits as ChannelApiError with retryAfterMs,
 * a streamed reply edited in place through delivery, workspace admins.
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

  it('asks users.info whether someone is a workspace admin', async () => {
    expect(await h.outbound.isAdmin!(THREAD, 'U0000ADM')).toBe(true);
    expect(await h.outbound.isAdmin!(THREAD, 'U0000ANN')).toBe(false);
    expect(await h.outbound.isAdmin!(THREAD, 'not an id')).toBe(false);
    expect(h.fake.callsOf('users.info')).toHaveLength(2);
  });
});
