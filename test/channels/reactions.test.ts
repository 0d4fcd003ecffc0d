/**
 * Status reactions on Discord, Slack and WhatsApp: each channel's outbound
 * `react`, through the platform's real client (discord.js REST,
 * `@slack/web-api`, the Graph client) against its fake. The runner's side
 * (which message shows what, and when) is end to end in telegram-reactions.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import type { ChannelDeps } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connection.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeSlack, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { type FakeWhatsApp, startFakeWhatsApp, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { DM, TOKEN } from './discord-harness.js';

let redis: RedisClient;
let deps: ChannelDeps;
const prefix = testPrefix();

beforeAll(() => {
  redis = createRedis({ url: redisUrl() });
  deps = { logger: createLogger({ level: 'silent' }), redis, prefix };
});

afterAll(async () => {
  await cleanupPrefix(redis, prefix);
  await closeRedis(redis);
});

describe('status reactions on Discord', () => {
  let fake: FakeDiscord;
  beforeAll(async () => {
    fake = await FakeDiscord.start({ token: TOKEN });
  });
  afterAll(() => fake.close());

  it('add 👀, then swap it for ✅ (or ❌); setting one again changes nothing', async () => {
    const { outbound } = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, reactions: true }, deps);
    const own = (m: string) => [...(fake.reactions.get(`${DM}:${m}`) ?? [])];
    await outbound.react!(`discord:${DM}`, '900000000000000001', 'taken');
    expect(own('900000000000000001')).toEqual(['👀']);
    await outbound.react!(`discord:${DM}`, '900000000000000001', 'answered');
    await outbound.react!(`discord:${DM}`, '900000000000000001', 'answered');
    expect(own('900000000000000001')).toEqual(['✅']);
    await outbound.react!(`discord:${DM}`, '900000000000000002', 'taken');
    await outbound.react!(`discord:${DM}`, '900000000000000002', 'failed');
    expect(own('900000000000000002')).toEqual(['❌']);
  });

  it('are off by default', () => {
    expect(createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase }, deps).outbound.react).toBeUndefined();
  });
});

describe('status reactions on Slack', () => {
  let slack: FakeSlack;
  beforeAll(async () => {
    slack = await startFakeSlack();
  });
  afterAll(() => slack.close());

  it('add eyes, then swap it for the configured emoji; a repeat is no error', async () => {
    const { outbound } = createSlackPlugin(
      { botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: slack.apiUrl, reactions: { answered: 'tada' } },
      deps,
    );
    const own = (ts: string) => [...(slack.reactions.get(`D0001:${ts}`) ?? [])];
    await outbound.react!('slack:D0001', '1700000000.000100', 'taken');
    await outbound.react!('slack:D0001', '1700000000.000100', 'taken');
    expect(own('1700000000.000100')).toEqual(['eyes']);
    await outbound.react!('slack:D0001', '1700000000.000100', 'answered');
    expect(own('1700000000.000100')).toEqual(['tada']);
    // A takeover repeating the last status: Slack's already_reacted / no_reaction are what was wanted.
    await outbound.react!('slack:D0001', '1700000000.000100', 'answered');
    await outbound.react!('slack:D0001', '1700000000.000200', 'failed');
    expect(own('1700000000.000200')).toEqual(['x']);
  });
});

describe('status reactions on WhatsApp', () => {
  let wa: FakeWhatsApp;
  beforeAll(async () => {
    wa = await startFakeWhatsApp();
  });
  afterAll(() => wa.close());

  it('send reaction messages, each replacing the last, and no text message', async () => {
    const { outbound } = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl, reactions: true }, deps);
    await outbound.react!('whatsapp:15550001111', 'wamid.alice1', 'taken');
    expect(wa.reactions.get('wamid.alice1')).toBe('👀');
    await outbound.react!('whatsapp:15550001111', 'wamid.alice1', 'answered');
    expect(wa.reactions.get('wamid.alice1')).toBe('✅');
    expect(wa.sent).toEqual([]);
  });
});
