/**
 * The Discord channel with the real discord.js client against the fake
 * Discord (REST + gateway), and the real host `receive` (createChannelHost,
 * Dispatch.ingest on real Redis). One client serves the whole file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { InvalidInputError } from '../../src/errors.js';
import { readRange } from '../../src/record/read.js';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { FakeDiscord, snowflake } from '../../testing/fakes/discord-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import {
  ALWAYS_CHANNEL,
  alice,
  BOT_ROLE,
  bob,
  CHANNEL,
  captureLogger,
  DM,
  GUILD,
  guild,
  mentionBot,
  otherBot,
  RecordingHost,
  realHost,
  THREAD,
  TOKEN,
} from './discord-harness.js';

let fake: FakeDiscord;
let plugin: ChannelPlugin;
let redis: RedisClient;
let host: RecordingHost;
let receive: ReturnType<typeof realHost>['receive'];
let logs: string[];
const prefix = testPrefix();

beforeAll(async () => {
  redis = createRedis({ url: redisUrl() });
  fake = await FakeDiscord.start({ token: TOKEN });
  fake.addGuild(guild);
  const captured = captureLogger();
  logs = captured.lines;
  receive = realHost({ redis, prefix, logger: captured.logger, outbound: () => plugin.outbound }).receive;
  host = new RecordingHost(receive);
  plugin = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, alwaysChannels: [ALWAYS_CHANNEL] }, { logger: captured.logger, redis, prefix });
  await plugin.start(host.asHost(captured.logger));
});

afterAll(async () => {
  await plugin?.stop();
  await fake?.close();
  await cleanupPrefix(redis, prefix);
  await closeRedis(redis);
});

/** A guild message in `channelId` that mentions the bot. */
const mention = (channelId: string, content: string, author = alice) => mentionBot(fake, channelId, content, author);

describe('discord gateway', () => {
  it('identifies with the intents it needs (guilds, guild messages, DMs, message content)', () => {
    const intents = fake.identifies[0]?.intents as number;
    // Guilds 1<<0, GuildMessages 1<<9, DirectMessages 1<<12, MessageContent 1<<15.
    expect(intents).toBe((1 << 0) | (1 << 9) | (1 << 12) | (1 << 15));
    expect(fake.unknownRoutes).toEqual([]);
  });
});

describe('discord inbound', () => {
  it('passes a DM to the host with normalized fields', async () => {
    const { message } = fake.messageCreate({ channelId: DM, author: alice, content: 'hello there' });
    const got = await host.waitForText('hello there');
    expect(got.message).toEqual({
      conversationId: `discord:${DM}`,
      updateKey: `discord:${message.id}`,
      chatId: DM,
      sender: { id: alice.id, name: 'Alice', isBot: false },
      text: 'hello there',
      messageId: message.id,
      metadata: { dm: true },
    });
    expect(got.result).toMatchObject({ kind: 'ingested', result: { kind: 'new-run' } });
  });

  it('names the sender by username when there is no display name', async () => {
    fake.messageCreate({ channelId: DM, author: bob, content: 'from bob' });
    expect((await host.waitForText('from bob')).message.sender).toEqual({ id: bob.id, name: 'bob', isBot: false });
  });

  describe('in a guild channel', () => {
    it('does not pass a message that does not mention the bot', async () => {
      fake.messageCreate({ channelId: CHANNEL, guildId: GUILD, author: alice, content: 'just chatting' });
      // Messages are handled in order: once the next one arrived, the first one was decided on.
      mention(CHANNEL, 'marker after chatting');
      await host.waitForText('marker after chatting');
      expect(host.withText('just chatting')).toEqual([]);
    });

    it('passes a message that mentions the bot, with the leading mention stripped', async () => {
      const { message } = mention(CHANNEL, 'what is the weather?');
      const got = await host.waitForText('what is the weather?');
      expect(got.message).toMatchObject({
        conversationId: `discord:${CHANNEL}`,
        updateKey: `discord:${message.id}`,
        chatId: CHANNEL,
        metadata: { guildId: GUILD },
      });
    });

    it('accepts the legacy nickname mention form <@!id>', async () => {
      fake.messageCreate({ channelId: CHANNEL, guildId: GUILD, author: alice, content: `<@!${fake.bot.id}>, nickname form`, mentions: [fake.bot] });
      expect((await host.waitForText('nickname form')).message.conversationId).toBe(`discord:${CHANNEL}`);
    });

    it("takes a mention of the bot's managed role as a mention of the bot", async () => {
      fake.messageCreate({ channelId: CHANNEL, guildId: GUILD, author: alice, content: `<@&${BOT_ROLE}> by role`, mentionRoles: [BOT_ROLE] });
      expect((await host.waitForText('by role')).message.conversationId).toBe(`discord:${CHANNEL}`);
    });

    it("passes a reply to one of the bot's messages, with what it replies to", async () => {
      const botMessage = { id: snowflake(), content: 'an earlier answer', author: fake.bot };
      const { message } = fake.messageCreate({ channelId: CHANNEL, guildId: GUILD, author: alice, content: 'follow-up question', replyTo: botMessage });
      const got = await host.waitForText('follow-up question');
      expect(got.message.replyTo).toEqual({ messageId: botMessage.id, text: 'an earlier answer' });
      expect(got.message.updateKey).toBe(`discord:${message.id}`);
    });

    it('passes every message in an always-answer channel', async () => {
      fake.messageCreate({ channelId: ALWAYS_CHANNEL, guildId: GUILD, author: alice, content: 'no mention needed' });
      expect((await host.waitForText('no mention needed')).message.conversationId).toBe(`discord:${ALWAYS_CHANNEL}`);
    });

    it('makes a thread its own conversation and keeps the parent channel in metadata', async () => {
      mention(THREAD, 'inside the thread');
      const got = await host.waitForText('inside the thread');
      expect(got.message.conversationId).toBe(`discord:${THREAD}`);
      expect(got.message.metadata).toEqual({ guildId: GUILD, threadParentId: CHANNEL });
    });

    it('passes attachments by reference', async () => {
      fake.messageCreate({
        channelId: DM,
        author: alice,
        content: 'see attached',
        attachments: [
          { filename: 'cat.png', url: 'https://cdn.example/cat.png', content_type: 'image/png', size: 1234 },
          { filename: 'notes.txt', url: 'https://cdn.example/notes.txt', size: 10 },
        ],
      });
      const got = await host.waitForText('see attached');
      expect(got.message.attachments).toEqual([
        { kind: 'image', ref: 'https://cdn.example/cat.png', name: 'cat.png', mime: 'image/png', size: 1234 },
        { kind: 'file', ref: 'https://cdn.example/notes.txt', name: 'notes.txt', size: 10 },
      ]);
    });
  });

  it('answers a control command through Discord, as a reply to it', async () => {
    const { message } = mention(CHANNEL, '/status');
    const got = await host.waitFor((rs) => rs.find((r) => r.message.messageId === message.id));
    expect(got.result).toMatchObject({ kind: 'command', command: 'status', duplicate: false });
    const [reply] = await fake.waitForCalls('POST', new RegExp(`^/channels/${CHANNEL}/messages$`));
    expect(reply?.body).toMatchObject({ content: expect.stringContaining('Queue mode: steer'), message_reference: { message_id: message.id } });
  });

  describe('ignores', () => {
    it("the bot's own messages, other bots and system messages", async () => {
      fake.messageCreate({ channelId: DM, author: fake.bot, content: 'my own echo' });
      fake.messageCreate({ channelId: DM, author: otherBot, content: 'a bot talking' });
      mention(CHANNEL, 'a bot mentioning', otherBot);
      fake.messageCreate({ channelId: ALWAYS_CHANNEL, guildId: GUILD, author: alice, content: 'pinned a message', type: 6 });
      fake.messageCreate({ channelId: DM, author: alice, content: 'marker after bots' });
      await host.waitForText('marker after bots');
      for (const text of ['my own echo', 'a bot talking', 'a bot mentioning', 'pinned a message']) expect(host.withText(text)).toEqual([]);
    });
  });
});

describe('discord gateway resume', () => {
  it('gets the events missed while disconnected from the replay', async () => {
    fake.dropConnection();
    fake.messageCreate({ channelId: DM, author: alice, content: 'sent while disconnected' });
    await fake.next('resumed');
    await host.waitForText('sent while disconnected');
    expect(fake.connections.at(-1)).toMatch(/^\/resume\?/);
  });

  it('records a MESSAGE_CREATE replayed after a resume once', async () => {
    const { seq, message } = fake.messageCreate({ channelId: DM, author: alice, content: 'replay me' });
    await host.waitForText('replay me');
    const identifies = fake.identifies.length;
    // Discord replays from the given sequence number on, including the event the client already handled.
    fake.dropConnection({ replayFrom: seq });
    const replayed = fake.next<Array<{ t: string; d: { id: string } }>>('replayed');
    await fake.next('resumed');
    expect((await replayed).map((e) => e.d.id)).toContain(message.id);
    fake.messageCreate({ channelId: DM, author: alice, content: 'marker after the replay' });
    await host.waitForText('marker after the replay');
    expect(fake.identifies.length).toBe(identifies);
    // discord.js drops a replay of a message still in its cache; whatever gets through, the host dedupes.
    const handed = host.withText('replay me');
    expect(handed.filter((r) => !(r.result?.kind === 'ingested' && r.result.result.kind === 'duplicate'))).toHaveLength(1);
    const record = await readRange(redis, conversationKeys(prefix, `discord:${DM}`).log);
    expect(record.filter((e) => e.kind === 'message.received' && e.updateKey === `discord:${message.id}`)).toHaveLength(1);
  });

  it('two hosts on one bot both get a MESSAGE_CREATE; the host dedupes it to one record entry', async () => {
    const second = new RecordingHost(receive);
    const { logger } = captureLogger();
    const other = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase }, { logger, redis, prefix });
    await other.start(second.asHost(logger));
    try {
      const { message } = fake.messageCreate({ channelId: DM, author: alice, content: 'seen by two hosts' });
      const [a, b] = await Promise.all([host.waitForText('seen by two hosts'), second.waitForText('seen by two hosts')]);
      const kinds = [a, b].map((r) => (r.result?.kind === 'ingested' ? r.result.result.kind : r.result?.kind)).sort();
      expect(kinds.filter((k) => k === 'duplicate')).toHaveLength(1);
      expect(kinds.filter((k) => k !== 'duplicate')).toHaveLength(1);
      const record = await readRange(redis, conversationKeys(prefix, `discord:${DM}`).log);
      expect(record.filter((e) => e.kind === 'message.received' && e.updateKey === `discord:${message.id}`)).toHaveLength(1);
    } finally {
      await other.stop();
    }
  });
});

describe('discord outbound', () => {
  it('sends a message as a reply, never pinging anyone but the person answered', async () => {
    const { messageId } = await plugin.outbound.send(`discord:${CHANNEL}`, 'the answer', { replyTo: '123456789012345678' });
    const [call] = fake.callsTo('POST', new RegExp(`^/channels/${CHANNEL}/messages$`)).slice(-1);
    expect(call?.body).toEqual({
      content: 'the answer',
      allowed_mentions: { parse: [], replied_user: true },
      flags: 4,
      message_reference: { message_id: '123456789012345678', channel_id: CHANNEL, fail_if_not_exists: false },
    });
    expect(fake.messages.get(messageId)?.content).toBe('the answer');
  });

  it('sends a delivery key as an enforced nonce: a retried send returns the same message', async () => {
    const first = await plugin.outbound.send(`discord:${DM}`, 'exactly once', { deliveryKey: 'r1abc:0' });
    const again = await plugin.outbound.send(`discord:${DM}`, 'exactly once', { deliveryKey: 'r1abc:0' });
    expect(again.messageId).toBe(first.messageId);
    const [call] = fake.callsTo('POST', /\/messages$/).slice(-1);
    expect(call?.body).toMatchObject({ nonce: expect.stringMatching(/^[0-9a-f]{25}$/), enforce_nonce: true });
    expect([...fake.messages.values()].filter((m) => m.content === 'exactly once')).toHaveLength(1);
  });

  it('gets a new message for the same nonce once Discord has forgotten it (after a few minutes)', async () => {
    const first = await plugin.outbound.send(`discord:${DM}`, 'much later', { deliveryKey: 'r1abc:7' });
    // Ten minutes pass: past the window in which Discord finds a message by its nonce.
    fake.messages.get(first.messageId)!.createdAt -= 10 * 60_000;
    const again = await plugin.outbound.send(`discord:${DM}`, 'much later', { deliveryKey: 'r1abc:7' });
    expect(again.messageId).not.toBe(first.messageId);
    expect([...fake.messages.values()].filter((m) => m.content === 'much later')).toHaveLength(2);
  });

  it('does not duplicate a message when Discord created it but the response was lost (5xx, retried by the REST client)', async () => {
    fake.fail('POST', /\/messages$/, { status: 502, body: { message: 'Bad Gateway', code: 0 }, commit: true });
    const before = fake.callsTo('POST', /\/messages$/).length;
    const { messageId } = await plugin.outbound.send(`discord:${DM}`, 'lost response', { deliveryKey: 'r1abc:1' });
    expect(
      fake
        .callsTo('POST', /\/messages$/)
        .slice(before)
        .map((c) => c.status),
    ).toEqual([502, 200]);
    expect([...fake.messages.values()].filter((m) => m.content === 'lost response').map((m) => m.id)).toEqual([messageId]);
  });

  it('edits a sent message in place', async () => {
    const { messageId } = await plugin.outbound.send(`discord:${DM}`, 'draft');
    await plugin.outbound.edit!(`discord:${DM}`, messageId, 'draft, finished');
    const [call] = fake.callsTo('PATCH', new RegExp(`^/channels/${DM}/messages/${messageId}$`));
    expect(call?.body).toEqual({ content: 'draft, finished', allowed_mentions: { parse: [], replied_user: true }, flags: 4 });
    expect(fake.messages.get(messageId)?.content).toBe('draft, finished');
  });

  it('shows typing', async () => {
    await plugin.outbound.typing!(`discord:${THREAD}`);
    expect(fake.callsTo('POST', new RegExp(`^/channels/${THREAD}/typing$`))).toHaveLength(1);
  });

  it('sends exactly 2000 characters and refuses 2001 without calling Discord (delivery splits)', async () => {
    expect(plugin.outbound.maxMessageChars).toBe(2000);
    const before = fake.calls.length;
    await plugin.outbound.send(`discord:${DM}`, 'x'.repeat(2000));
    await expect(plugin.outbound.send(`discord:${DM}`, 'x'.repeat(2001))).rejects.toBeInstanceOf(InvalidInputError);
    await expect(plugin.outbound.send(`discord:${DM}`, '')).rejects.toBeInstanceOf(InvalidInputError);
    expect(fake.calls.length).toBe(before + 1);
  });

  it('refuses a conversation of another channel', async () => {
    await expect(plugin.outbound.send('telegram:42', 'hi')).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('waits out a short 429 inside the REST client and succeeds', async () => {
    fake.rateLimit('POST', /\/channels\/\d+\/messages$/, { retryAfterSec: 0.05 });
    const before = fake.callsTo('POST', /\/messages$/).length;
    const { messageId } = await plugin.outbound.send(`discord:${DM}`, 'after a short limit');
    const calls = fake.callsTo('POST', /\/messages$/).slice(before);
    expect(calls.map((c) => c.status)).toEqual([429, 200]);
    expect(fake.messages.get(messageId)?.content).toBe('after a short limit');
  });

  it('fails a long 429 with ChannelApiError carrying retryAfterMs', async () => {
    fake.rateLimit('POST', /\/channels\/\d+\/messages$/, { retryAfterSec: 60 });
    const err = await plugin.outbound.send(`discord:${CHANNEL}`, 'too soon').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ChannelApiError', code: 'CHANNEL_API', status: 429 });
    expect((err as { retryAfterMs: number }).retryAfterMs).toBeGreaterThanOrEqual(60_000);
  });

  it('maps an API error to ChannelApiError with its status', async () => {
    const err = await plugin.outbound.edit!(`discord:${DM}`, '999999999999999999', 'nope').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ChannelApiError', status: 404 });
    expect((err as Error).message).toContain('Unknown Message');
  });

  it('streams edits 1500 ms apart only when streaming is on', () => {
    const deps = { logger: captureLogger().logger, redis, prefix };
    expect(plugin.outbound.streamEditIntervalMs).toBeUndefined();
    const streaming = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, streaming: true }, deps);
    expect(streaming.outbound.streamEditIntervalMs?.(`discord:${DM}`)).toBe(1500);
  });
});

describe('discord secrets', () => {
  it('never puts the token in an error, even when Discord echoes it', async () => {
    // 403, not 401: on a 401 @discordjs/rest forgets the token (as it should), which would end this file's client.
    fake.fail('POST', /\/messages$/, { status: 403, body: (call) => ({ message: `Missing Access (${call.authorization})`, code: 50001 }) });
    const err = await plugin.outbound.send(`discord:${DM}`, 'hi').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'ChannelApiError', status: 403 });
    expect(JSON.stringify({ message: (err as Error).message, stack: (err as Error).stack })).not.toContain(TOKEN);
  });

  it('never writes the token to the log', () => {
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(TOKEN);
    expect(logs.join('\n')).not.toContain(TOKEN.split('.')[2]);
  });
});
