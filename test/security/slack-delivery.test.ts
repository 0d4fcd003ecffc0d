/**
 * Attacks on Slack delivery: a reply carries its delivery key in Slack
 * message metadata, and a resend (the runner died between Slack's answer
 * and the outbox write) first looks for a message carrying the key. Any
 * member of the channel can post a message with metadata of their choosing
 * (a user token, or an app of their own in the workspace), and the keys of a
 * run's replies are `<run>:<turn>:<n>`: seen on one reply, the next ones are
 * guessed. The lookup must take only the bot's own messages for its reply.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { deliveryMetadata } from '../../plugins/slack/sent-lookup.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { type FakeSlack, SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const CHANNEL = 'C0000CH1';
const THREAD_TS = '1700000001.000100';
const THREAD = `slack:${CHANNEL}:${THREAD_TS}`;
/** A member of the channel, posting through an app of their own. */
const MALLORY = { user: 'U0MALLORY', botId: 'B0MALLORY' };

let h: { fake: FakeSlack; redis: Redis; prefix: string; outbound: ChannelOutbound };

beforeEach(async () => {
  const fake = await startFakeSlack();
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const plugin = createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: 'x'.repeat(32), apiUrl: fake.apiUrl }, { logger, redis, prefix });
  h = { fake, redis, prefix, outbound: plugin.outbound };
});
afterEach(async () => {
  await h.fake.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
});

describe('slack delivery', () => {
  it("takes no other member's message carrying a forged delivery key for the bot's reply: the reply is posted", async () => {
    await h.outbound.send(THREAD, 'First part of the answer.', { deliveryKey: 'runM:4:0' });
    // Mallory read the key of that reply and posts under the next ones: once with the reply's very text, once with her own.
    h.fake.postAs(MALLORY, CHANNEL, THREAD_TS, 'The rest of the answer.', deliveryMetadata('runM:4:1'));
    h.fake.postAs(MALLORY, CHANNEL, THREAD_TS, 'nothing to see here', deliveryMetadata('runM:4:2'));
    const since = Date.now() - 1000;

    for (const [key, text] of [
      ['runM:4:1', 'The rest of the answer.'],
      ['runM:4:2', 'And a last word.'],
    ] as const) {
      const sent = await h.outbound.send(THREAD, text, { deliveryKey: key, maybeSentSince: since });
      const posted = h.fake.messages.find((m) => m.ts === sent.messageId);
      expect(posted, key).toMatchObject({ text, metadata: deliveryMetadata(key) });
      expect(posted?.author, key).toBeUndefined();
    }
    expect(h.fake.callsOf('chat.update')).toEqual([]);
    expect(h.fake.messages.filter((m) => m.author === undefined).map((m) => m.text)).toEqual([
      'First part of the answer.',
      'The rest of the answer.',
      'And a last word.',
    ]);
  });
});
