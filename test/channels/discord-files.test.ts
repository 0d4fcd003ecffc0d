/**
 * Files out on Discord: the real plugin's outbound side (discord.js REST,
 * unstarted, as a runner uses it) against the fake Discord, directly and
 * through a run's delivery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { DISCORD_MAX_FILE_BYTES } from '../../plugins/discord/outbound.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connection.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { PDF } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { CHANNEL, DM, guild, TOKEN } from './discord-harness.js';

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(32, 1)]);
const logger = createLogger({ level: 'silent' });
const prefix = testPrefix();

let fake: FakeDiscord;
let plugin: ChannelPlugin;
let redis: RedisClient;

beforeAll(async () => {
  redis = createRedis({ url: redisUrl() });
  fake = await FakeDiscord.start({ token: TOKEN });
  fake.addGuild(guild);
  plugin = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase }, { logger, redis, prefix });
});

afterAll(async () => {
  await fake?.close();
  await cleanupPrefix(redis, prefix);
  await closeRedis(redis);
});

describe('discord files out', () => {
  it('declares a 25 MiB file limit', () => {
    expect(plugin.outbound.maxFileBytes).toBe(DISCORD_MAX_FILE_BYTES);
    expect(DISCORD_MAX_FILE_BYTES).toBe(25 * 1024 * 1024);
  });

  it('posts a message with the file attached, its caption as content and no pings', async () => {
    const { messageId } = await plugin.outbound.sendFile!(`discord:${CHANNEL}`, {
      name: 'report.pdf',
      mimeType: 'application/pdf',
      bytes: PDF,
      caption: 'the report @everyone',
    });
    const stored = fake.messages.get(messageId)!;
    expect(stored.content).toBe('the report @everyone');
    expect(stored.files).toHaveLength(1);
    expect(stored.files![0]).toMatchObject({ filename: 'report.pdf', contentType: 'application/pdf' });
    expect(stored.files![0]!.data.equals(PDF)).toBe(true);
    const call = fake.calls.findLast((c) => c.method === 'POST' && c.path === `/channels/${CHANNEL}/messages`)!;
    expect(call.body).toMatchObject({ allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: 'report.pdf' }] });
  });

  it('sends an image without a caption, and a retried delivery key returns the same message', async () => {
    const file = { name: 'chart.png', mimeType: 'image/png', bytes: PNG };
    const first = await plugin.outbound.sendFile!(`discord:${DM}`, file, { deliveryKey: 'run1:k_1:0' });
    const again = await plugin.outbound.sendFile!(`discord:${DM}`, file, { deliveryKey: 'run1:k_1:0' });
    expect(again.messageId).toBe(first.messageId);
    expect(fake.messages.get(first.messageId)!.files![0]!.data.equals(PNG)).toBe(true);
  });

  it('retries an upload refused with 429 through delivery and creates exactly one message', async () => {
    fake.rateLimit('POST', new RegExp(`^/channels/${DM}/messages$`), { retryAfterSec: 0.05 });
    const before = [...fake.messages.values()].filter((m) => m.files).length;
    const d = new RunDelivery({
      client: redis,
      prefix,
      conversationId: `discord:${DM}`,
      runId: 'run2',
      resolve: () => plugin.outbound,
      logger,
      sleep: async () => undefined,
    });
    expect(await d.file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_2' })).toEqual({ outcome: 'sent' });
    expect([...fake.messages.values()].filter((m) => m.files).length).toBe(before + 1);
  });

  it('sends one clear message instead of a file over 25 MiB', async () => {
    const d = new RunDelivery({
      client: redis,
      prefix,
      conversationId: `discord:${DM}`,
      runId: 'run3',
      resolve: () => plugin.outbound,
      logger,
      sleep: async () => undefined,
    });
    const result = await d.file({ name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(DISCORD_MAX_FILE_BYTES + 1) }, { key: 'k_3' });
    expect(result).toEqual({ outcome: 'too-large', maxBytes: DISCORD_MAX_FILE_BYTES });
    const last = [...fake.messages.values()].at(-1)!;
    expect(last.content).toBe("[file huge.zip could not be sent here: it is larger than this channel's limit of 25 MiB]");
    expect(last.files).toBeUndefined();
  });
});
