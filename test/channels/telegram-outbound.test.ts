import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, routeRegistry } from '../../host/http.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { ChannelApiError, ConfigError, InvalidInputError } from '../../src/errors.js';
import { FAKE_TOKEN } from '../../testing/fakes/telegram-server.js';
import { startTelegramHarness, type TelegramHarness } from './telegram-harness.js';

const PRIVATE = 'telegram:1001';
const GROUP = 'telegram:-100777';
const TOPIC = 'telegram:-100777:42';

const CANT_PARSE = { error_code: 400, description: 'Bad Request: can\'t parse entities: Can\'t find end tag corresponding to start tag "b"' };

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

describe('telegram outbound', () => {
  let h: TelegramHarness;
  beforeEach(async () => {
    h = await startTelegramHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it("declares Telegram's limit of 4096 characters", () => {
    expect(h.plugin.outbound.maxMessageChars).toBe(4096);
    expect(h.plugin.outbound.channelId).toBe('telegram');
  });

  describe('send', () => {
    it('sends plain text and returns the platform message id', async () => {
      const { messageId } = await h.plugin.outbound.send(PRIVATE, 'hello <there> & you');
      const [msg] = h.fake.sent;
      expect(msg).toMatchObject({ chatId: 1001, text: 'hello <there> & you', parseMode: undefined, threadId: undefined });
      expect(messageId).toBe(String(msg?.messageId));
    });

    it('sends into the forum topic and replies to the given message', async () => {
      await h.plugin.outbound.send(TOPIC, 'in the topic', { replyTo: '55' });
      expect(h.fake.sent[0]).toMatchObject({ chatId: -100777, threadId: 42, replyTo: 55 });
      expect(h.fake.callsOf('sendMessage')[0]?.payload.reply_parameters).toEqual({ message_id: 55, allow_sending_without_reply: true });
    });

    it('formats markdown as Telegram HTML that the API accepts', async () => {
      const md = '# Plan\n**bold** and _it_ with `a<b>` and [docs](https://example.com/?a=1&b=2)\n```ts\nif (a < b && c) {}\n```\n- item';
      await h.plugin.outbound.send(PRIVATE, md, { format: 'markdown' });
      const [msg] = h.fake.sent;
      expect(msg?.parseMode).toBe('HTML');
      expect(msg?.raw).toContain('<b>bold</b>');
      expect(msg?.raw).toContain('<pre><code class="language-ts">if (a &lt; b &amp;&amp; c) {}</code></pre>');
      expect(msg?.text).toBe('Plan\nbold and it with a<b> and docs\nif (a < b && c) {}\n• item');
    });

    it('resends as plain text when Telegram cannot parse the formatted text', async () => {
      h.fake.failNext('sendMessage', CANT_PARSE);
      const { messageId } = await h.plugin.outbound.send(PRIVATE, '**half bold', { format: 'markdown' });
      const calls = h.fake.callsOf('sendMessage');
      expect(calls.map((c) => [c.outcome, c.payload.parse_mode])).toEqual([
        [400, 'HTML'],
        ['ok', undefined],
      ]);
      expect(h.fake.sent).toHaveLength(1);
      expect(h.fake.sent[0]?.text).toBe('**half bold');
      expect(messageId).toBe(String(h.fake.sent[0]?.messageId));
    });

    it('does not fall back on other errors of the formatted send', async () => {
      h.fake.failNext('sendMessage', { error_code: 403, description: 'Forbidden: bot was blocked by the user' });
      const err = await caught(h.plugin.outbound.send(PRIVATE, '**x**', { format: 'markdown' }));
      expect(err).toBeInstanceOf(ChannelApiError);
      expect((err as ChannelApiError).status).toBe(403);
      expect(h.fake.callsOf('sendMessage')).toHaveLength(1);
    });

    it('throws ChannelApiError with retryAfterMs on 429', async () => {
      h.fake.failNext('sendMessage', { error_code: 429, description: 'Too Many Requests: retry after 7', parameters: { retry_after: 7 } });
      const err = await caught(h.plugin.outbound.send(GROUP, 'hi'));
      expect(err).toBeInstanceOf(ChannelApiError);
      expect(err).toMatchObject({ code: 'CHANNEL_API', status: 429, retryAfterMs: 7000 });
    });

    it('throws ChannelApiError with retryAfterMs on 429 of the formatted send too', async () => {
      h.fake.failNext('sendMessage', { error_code: 429, description: 'Too Many Requests: retry after 2', parameters: { retry_after: 2 } });
      const err = await caught(h.plugin.outbound.send(GROUP, '**hi**', { format: 'markdown' }));
      expect(err).toMatchObject({ status: 429, retryAfterMs: 2000 });
    });

    it('refuses a conversation of another channel without calling Telegram', async () => {
      await expect(h.plugin.outbound.send('discord:1', 'x')).rejects.toBeInstanceOf(InvalidInputError);
      expect(h.fake.callsOf('sendMessage')).toHaveLength(0);
    });
  });

  describe('edit', () => {
    it('replaces the text of a sent message', async () => {
      const { messageId } = await h.plugin.outbound.send(PRIVATE, 'draft');
      await h.plugin.outbound.edit!(PRIVATE, messageId, 'draft, longer');
      expect(h.fake.sent[0]?.text).toBe('draft, longer');
    });

    it('treats "message is not modified" as success', async () => {
      const { messageId } = await h.plugin.outbound.send(PRIVATE, 'same');
      await expect(h.plugin.outbound.edit!(PRIVATE, messageId, 'same')).resolves.toBeUndefined();
      expect(h.fake.callsOf('editMessageText')[0]?.outcome).toBe(400);
    });

    it('throws ChannelApiError for a message that does not exist', async () => {
      const err = await caught(h.plugin.outbound.edit!(PRIVATE, '999999', 'x'));
      expect(err).toMatchObject({ status: 400, retryAfterMs: undefined });
      expect((err as Error).message).toContain('message to edit not found');
    });

    it('throws ChannelApiError with retryAfterMs on 429', async () => {
      const { messageId } = await h.plugin.outbound.send(GROUP, 'a');
      h.fake.failNext('editMessageText', { error_code: 429, description: 'Too Many Requests: retry after 3', parameters: { retry_after: 3 } });
      await expect(h.plugin.outbound.edit!(GROUP, messageId, 'b')).rejects.toMatchObject({ status: 429, retryAfterMs: 3000 });
    });
  });

  it('shows typing with sendChatAction, in the topic', async () => {
    await h.plugin.outbound.typing!(TOPIC);
    expect(h.fake.callsOf('sendChatAction')[0]?.payload).toEqual({ chat_id: -100777, action: 'typing', message_thread_id: 42 });
  });

  it('does not stream unless configured', () => {
    expect(h.plugin.outbound.streamEditIntervalMs).toBeUndefined();
  });

  it('registers the control commands at start', () => {
    expect(h.fake.commands.map((c) => c.command)).toEqual(['stop', 'new', 'compact', 'queue', 'status']);
  });

  describe('the bot token', () => {
    it('never appears in thrown errors or in logs', async () => {
      const errors: unknown[] = [];
      h.fake.failNext('sendMessage', { error_code: 401, description: 'Unauthorized' });
      errors.push(await caught(h.plugin.outbound.send(PRIVATE, 'x')));
      h.fake.failNext('sendChatAction', { error_code: 500, description: 'Internal Server Error' });
      errors.push(await caught(h.plugin.outbound.typing!(PRIVATE)));
      // A network failure: grammY's underlying error names the URL, which holds the token.
      await h.fake.close();
      errors.push(await caught(h.plugin.outbound.send(PRIVATE, 'x')));
      errors.push(await caught(h.plugin.outbound.edit!(PRIVATE, '1', 'x')));
      for (const err of errors) {
        expect(err).toBeInstanceOf(ChannelApiError);
        h.logger.error({ err }, 'delivery failed');
        const e = err as Error;
        const everything = `${e.message}\n${e.stack}\n${String(e.cause ?? '')}\n${JSON.stringify(e)}`;
        expect(everything).not.toContain(FAKE_TOKEN);
        expect(everything).not.toContain(FAKE_TOKEN.split(':')[1]);
      }
      expect((errors[2] as Error).message).toMatch(/sendMessage failed: network error/);
      expect(h.log.text).toContain('delivery failed');
      expect(h.log.text).not.toContain(FAKE_TOKEN.split(':')[1]);
    });
  });
});

describe('telegram streaming', () => {
  it('throttles edits to 1 s in private chats and 3 s in groups', async () => {
    const h = await startTelegramHarness({ streaming: true });
    try {
      const interval = h.plugin.outbound.streamEditIntervalMs!;
      expect([interval(PRIVATE), interval(GROUP), interval(TOPIC)]).toEqual([1000, 3000, 3000]);
    } finally {
      await h.close();
    }
  });
});

describe('telegram start', () => {
  it('fails with a token-free ChannelApiError when Telegram refuses the token', async () => {
    const h = await startTelegramHarness();
    const wrong = '7012345678:AAHwrongTokenXXXXXXXXXXXXXXXXXXXXXXXXXXXX';
    const plugin = createTelegramPlugin(
      { token: wrong, apiRoot: h.fake.apiRoot, mode: 'webhook', webhookSecret: 'x'.repeat(16) },
      { logger: h.logger, redis: h.redis, prefix: h.prefix },
    );
    try {
      const err = await caught(plugin.start(h.host));
      expect(err).toMatchObject({ code: 'CHANNEL_API', status: 401 });
      expect((err as Error).message).not.toContain(wrong);
    } finally {
      await plugin.stop();
      await h.close();
    }
  });

  it('skips setMyCommands when registerCommands is false', async () => {
    const h = await startTelegramHarness({ registerCommands: false, webhookPath: '/tg2' });
    try {
      expect(h.fake.callsOf('setMyCommands')).toHaveLength(0);
    } finally {
      await h.close();
    }
  });

  it('keeps running when setMyCommands fails', async () => {
    const h = await startTelegramHarness({ registerCommands: false });
    const plugin = createTelegramPlugin(
      { token: FAKE_TOKEN, apiRoot: h.fake.apiRoot, mode: 'webhook', webhookSecret: 'x'.repeat(16), webhookPath: '/other' },
      { logger: h.logger, redis: h.redis, prefix: h.prefix },
    );
    h.fake.failNext('setMyCommands', { error_code: 400, description: 'Bad Request: BOT_COMMAND_INVALID' });
    // The harness's server already listens; this plugin registers its route on a fresh one.
    const http = createHttpServer({
      config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } },
      redis: h.redis,
      logger: h.logger,
    });
    try {
      await expect(plugin.start({ ...h.host, routes: routeRegistry(http) })).resolves.toBeUndefined();
      expect(h.log.text).toContain('could not register the bot commands');
    } finally {
      await plugin.stop();
      await http.close();
      await h.close();
    }
  });
});

describe('telegram config', () => {
  const deps = { logger: undefined as never, redis: undefined as never, prefix: 't' };
  it('requires a webhook secret of at least 16 characters in webhook mode', () => {
    for (const webhookSecret of [undefined, 'short']) {
      const err = (() => {
        try {
          createTelegramPlugin({ token: FAKE_TOKEN, mode: 'webhook', webhookSecret }, deps);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues[0]?.path).toBe('channels.telegram.webhookSecret');
      expect((err as Error).message).not.toContain(FAKE_TOKEN);
    }
  });

  it('rejects a token that is not a bot token, and an apiRoot with a trailing slash, without echoing the token', () => {
    expect(() => createTelegramPlugin({ token: 'abc' }, deps)).toThrow(ConfigError);
    expect(() => createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: 'http://127.0.0.1:8081/' }, deps)).toThrow(/apiRoot/);
  });
});
