import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { ALICE, FAKE_TOKEN, messageUpdate, type TgUser } from '../../testing/fakes/telegram-server.js';
import { startTelegramHarness, type TelegramHarness, WEBHOOK_SECRET } from './telegram-harness.js';

const BOB: TgUser = { id: 2002, is_bot: false, first_name: 'Bob' };
const GROUP = -100777;

async function redisKeys(h: TelegramHarness): Promise<string[]> {
  return h.redis.keys(`${h.prefix}:*`);
}

describe('telegram webhook', () => {
  let h: TelegramHarness;
  beforeEach(async () => {
    h = await startTelegramHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  describe('secret token', () => {
    it('answers 401 and passes nothing on when the secret is missing', async () => {
      const res = await h.post(messageUpdate({ text: 'hi' }), {});
      expect(res.status).toBe(401);
      expect(res.body.error).toMatch(/secret/i);
      expect(h.host.received).toEqual([]);
      expect(await redisKeys(h)).toEqual([]);
    });

    it('answers 401 when the secret is wrong, also when only its last character differs', async () => {
      for (const secret of ['nope', `${WEBHOOK_SECRET.slice(0, -1)}X`, `${WEBHOOK_SECRET}X`]) {
        const res = await h.post(messageUpdate({ text: 'hi' }), { 'x-telegram-bot-api-secret-token': secret });
        expect(res.status).toBe(401);
      }
      expect(h.host.received).toEqual([]);
    });

    it('checks the secret before the body, so a bad body with a bad secret is 401', async () => {
      const res = await h.post('{not json', { 'x-telegram-bot-api-secret-token': 'wrong' });
      expect(res.status).toBe(401);
    });
  });

  describe('bad bodies', () => {
    it('answers 400 with a JSON error for invalid JSON', async () => {
      const res = await h.post('{"update_id": 1, ');
      expect(res.status).toBe(400);
      expect(typeof res.body.error).toBe('string');
    });

    it('answers 400 naming the field for an update without update_id or with a malformed message', async () => {
      const noId = await h.post({ message: { text: 'x' } });
      expect(noId.status).toBe(400);
      expect(noId.body.error).toContain('update_id');
      const badChat = await h.post({ update_id: 5, message: { message_id: 1, chat: { id: 'x', type: 'private' }, text: 'hi' } });
      expect(badChat.status).toBe(400);
      expect(badChat.body.error).toContain('message.chat.id');
      expect(h.host.received).toEqual([]);
      expect(await redisKeys(h)).toEqual([]);
    });
  });

  it('answers 200 and ignores updates that are not new messages', async () => {
    const edited = await h.post({ update_id: 10, edited_message: { message_id: 1, chat: { id: 1, type: 'private' }, text: 'x' } });
    const callback = await h.post({ update_id: 11, callback_query: { id: 'q', from: ALICE, data: 'd' } });
    expect([edited.status, callback.status]).toEqual([200, 200]);
    expect(edited.body).toEqual({ ok: true, ignored: 'not-a-message' });
    expect(h.host.received).toEqual([]);
  });

  it('normalizes a private chat message and passes it to receive', async () => {
    const update = messageUpdate({ updateId: 4242, text: 'hello bot', messageId: 77 });
    const res = await h.post(update);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, result: 'ingested' });
    expect(h.host.received).toEqual([
      {
        conversationId: `telegram:${ALICE.id}`,
        updateKey: 'telegram:4242',
        chatId: String(ALICE.id),
        sender: { id: String(ALICE.id), name: 'Alice Liddell', isBot: false },
        text: 'hello bot',
        messageId: '77',
      },
    ]);
    expect(h.host.results[0]).toMatchObject({ kind: 'ingested', result: { kind: 'new-run', seq: 1 } });
  });

  it('takes a message sent on behalf of a chat as from that chat (`c<chat id>`, its title), not from the placeholder in `from`', async () => {
    const channelBot: TgUser = { id: 136817688, is_bot: true, first_name: 'Channel', username: 'Channel_Bot' };
    const channel = { id: -1001234, type: 'channel', title: 'Daily News' };
    await h.post(messageUpdate({ chatId: GROUP, from: channelBot, text: '/status', extra: { sender_chat: channel } }));
    const noFrom = messageUpdate({ chatId: GROUP, text: '/status' });
    delete noFrom.message.from;
    await h.post(noFrom);
    expect(h.host.received.map((m) => m.sender)).toEqual([
      { id: 'c-1001234', name: 'Daily News' },
      { id: `c${GROUP}`, name: 'Test group' },
    ]);
  });

  it('carries reply-to, caption and attachments by reference (largest photo size)', async () => {
    await h.post(
      messageUpdate({
        caption: 'look at this',
        replyTo: { message_id: 12, from: BOB, text: 'earlier' },
        extra: {
          photo: [
            { file_id: 'small', width: 90, height: 60 },
            { file_id: 'large', width: 1280, height: 853, file_size: 120_000 },
            { file_id: 'medium', width: 320, height: 213 },
          ],
          document: { file_id: 'doc1', file_name: 'report.pdf', mime_type: 'application/pdf', file_size: 999 },
          voice: { file_id: 'voice1', mime_type: 'audio/ogg' },
        },
      }),
    );
    const [m] = h.host.received;
    expect(m?.text).toBe('look at this');
    expect(m?.replyTo).toEqual({ messageId: '12', text: 'earlier' });
    expect(m?.attachments).toEqual([
      { kind: 'image', ref: 'large', size: 120_000 },
      { kind: 'file', ref: 'doc1', name: 'report.pdf', mime: 'application/pdf', size: 999 },
      { kind: 'audio', ref: 'voice1', mime: 'audio/ogg' },
    ]);
  });

  it('ignores a message with neither text nor attachments', async () => {
    const res = await h.post(messageUpdate({ extra: { new_chat_members: [BOB] } }));
    expect(res.body).toEqual({ ok: true, ignored: 'empty' });
    expect(h.host.received).toEqual([]);
  });

  describe('forum topics', () => {
    it('gives each topic its own conversation, and does not take the topic root for a reply', async () => {
      await h.post(messageUpdate({ chatId: GROUP, text: '@steer_test_bot in topic 7', topicId: 7, replyTo: { message_id: 7, text: 'Topic' } }));
      await h.post(messageUpdate({ chatId: GROUP, text: '@steer_test_bot in topic 9', topicId: 9 }));
      await h.post(messageUpdate({ chatId: GROUP, text: '@steer_test_bot in general' }));
      expect(h.host.received.map((m) => m.conversationId)).toEqual([`telegram:${GROUP}:7`, `telegram:${GROUP}:9`, `telegram:${GROUP}`]);
      expect(h.host.received[0]?.replyTo).toBeUndefined();
      expect(h.host.received[0]?.chatId).toBe(String(GROUP));
    });
  });

  describe('groups in mention mode', () => {
    it('passes a message that mentions the bot by entity, case-insensitively', async () => {
      const text = 'hey @Steer_Test_Bot what time is it';
      const res = await h.post(messageUpdate({ chatId: GROUP, from: BOB, text, entities: [{ type: 'mention', offset: 4, length: 15 }] }));
      expect(res.body).toEqual({ ok: true, result: 'ingested' });
      expect(h.host.received[0]?.text).toBe(text);
    });

    it('passes a text mention of the bot user and a reply to one of its messages', async () => {
      await h.post(
        messageUpdate({
          chatId: GROUP,
          from: BOB,
          text: 'Steer, help',
          entities: [{ type: 'text_mention', offset: 0, length: 5, user: { id: h.fake.bot.id, is_bot: true, first_name: 'Steer' } }],
        }),
      );
      await h.post(
        messageUpdate({
          chatId: GROUP,
          from: BOB,
          text: 'and then?',
          replyTo: { message_id: 3, from: { id: h.fake.bot.id, is_bot: true, first_name: 'Steer' }, text: 'first answer' },
        }),
      );
      expect(h.host.received.map((m) => m.text)).toEqual(['Steer, help', 'and then?']);
      expect(h.host.received[1]?.replyTo).toEqual({ messageId: '3', text: 'first answer' });
    });

    it('does not pass other messages, or mentions of another bot, and answers 200', async () => {
      const plain = await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: 'just chatting' }));
      const other = await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: '@other_bot hi', entities: [{ type: 'mention', offset: 0, length: 10 }] }));
      const prefixOnly = await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: 'mail @steer_test_bot_fan' }));
      const replyToBob = await h.post(messageUpdate({ chatId: GROUP, from: ALICE, text: 'yes', replyTo: { message_id: 4, from: BOB, text: 'q' } }));
      for (const res of [plain, other, prefixOnly, replyToBob]) expect(res).toEqual({ status: 200, body: { ok: true, ignored: 'not-addressed' } });
      expect(h.host.received).toEqual([]);
    });

    it("always passes commands, strips this bot's @name, and skips commands for other bots", async () => {
      await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: '/stop' }));
      await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: '/queue@steer_test_bot collect' }));
      const other = await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: '/stop@other_bot' }));
      expect(h.host.received.map((m) => m.text)).toEqual(['/stop', '/queue collect']);
      expect(other.body).toEqual({ ok: true, ignored: 'not-addressed' });
    });
  });

  it('answers 200 for a duplicate delivery and the host dedupes it to one record entry', async () => {
    const update = messageUpdate({ updateId: 9001, text: 'once' });
    const results = await Promise.all([h.post(update), h.post(update), h.post(update)]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const kinds = h.host.results.map((r) => (r.kind === 'ingested' ? r.result.kind : r.kind)).sort();
    expect(kinds).toEqual(['duplicate', 'duplicate', 'new-run']);
    const logKeys = (await redisKeys(h)).filter((k) => k.endsWith(':log'));
    expect(logKeys).toHaveLength(1);
    expect(await h.redis.xlen(logKeys[0]!)).toBe(1);
  });
});

describe('telegram webhook options', () => {
  it('answers 503 when the host cannot reach Redis, so Telegram retries', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on('error', () => undefined); // the refused connection is the point of the test
    const h = await startTelegramHarness({}, { hostRedis: dead });
    try {
      const res = await h.post(messageUpdate({ text: 'hi' }));
      expect(res).toEqual({ status: 503, body: { error: 'redis unreachable' } });
      expect(await redisKeys(h)).toEqual([]);
    } finally {
      await h.close();
      dead.disconnect();
    }
  });

  it('answers every group message in `always` mode', async () => {
    const h = await startTelegramHarness({ groups: 'always' });
    try {
      await h.post(messageUpdate({ chatId: GROUP, from: BOB, text: 'no mention' }));
      expect(h.host.received.map((m) => m.text)).toEqual(['no mention']);
    } finally {
      await h.close();
    }
  });

  it('refuses allow-lists and a policy given to the plugin in code, naming where each moved', async () => {
    const deps = { logger: createLogger({ level: 'silent' }), redis: undefined as never, prefix: 'unused' };
    const config = { token: FAKE_TOKEN, allowedUsers: [String(ALICE.id)], allowedChats: [GROUP], policy: 'followup' as const };
    const err = await Promise.resolve()
      .then(() => createTelegramPlugin(config, deps))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues).toEqual([
      { path: 'channels.telegram.allowedUsers', message: expect.stringContaining('access.channels.telegram.users') },
      { path: 'channels.telegram.allowedChats', message: expect.stringContaining('access.channels.telegram.groups') },
      { path: 'channels.telegram.policy', message: expect.stringContaining('inputPolicy') },
    ]);
  });

  it('serves the configured webhook path and registers the webhook when a public URL is set', async () => {
    const h = await startTelegramHarness({ webhookPath: '/hooks/tg', webhookUrl: 'https://bot.example.com/hooks/tg' });
    try {
      expect(h.fake.webhook).toEqual({ url: 'https://bot.example.com/hooks/tg', secret_token: WEBHOOK_SECRET });
      expect((await h.post(messageUpdate({ text: 'hi' }))).status).toBe(200);
      expect(h.host.received).toHaveLength(1);
    } finally {
      await h.close();
    }
  });
});
