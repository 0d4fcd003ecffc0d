/**
 * The Telegram channel's implementation (grammY): updates arrive by webhook or by long
 * polling (one polling host across all hosts, by a Redis lease), are
 * normalized and handed to the host; replies go out through `outbound`.
 */

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Api } from 'grammy';
import type { ChannelDeps, ChannelHost, ChannelPlugin, ReceiveResult } from '../../src/channel.js';
import { parseSection } from '../../src/config-section.js';
import { InvalidInputError } from '../../src/errors.js';
import { channelKeys } from '../../src/keys.js';
import { type TelegramConfig, type TelegramConfigInput, telegramConfigSchema } from './config.js';
import { toChannelApiError } from './errors.js';
import { RedisLease } from './lease.js';
import { type BotIdentity, normalizeUpdate } from './normalize.js';
import { createTelegramOutbound } from './outbound.js';
import { TelegramPoller } from './poller.js';
import { type TelegramUpdate, telegramUpdateSchema } from './update-schema.js';
import { registerWebhookRoute } from './webhook.js';

export type { TelegramConfigInput } from './config.js';

const CHANNEL_ID = 'telegram';

/** The control commands shown in Telegram's command menu. */
const COMMANDS = [
  { command: 'stop', description: 'Stop the current answer' },
  { command: 'new', description: 'Start a fresh conversation' },
  { command: 'compact', description: 'Summarize the conversation so far' },
  { command: 'queue', description: 'How messages sent while I work are handled: steer, followup, collect, interrupt, supersede' },
  { command: 'status', description: 'What I am doing now' },
];

function parseConfig(config: TelegramConfigInput): TelegramConfig {
  return parseSection(telegramConfigSchema, config, ['channels', CHANNEL_ID]);
}

/**
 * Creates the Telegram channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createTelegramPlugin(config: TelegramConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const api = new Api(cfg.token, { apiRoot: cfg.apiRoot, ...(deps.fetch && { fetch: deps.fetch }) });
  const outbound = createTelegramOutbound({
    channelId: CHANNEL_ID,
    api,
    token: cfg.token,
    streaming: cfg.streaming,
    logger,
    apiRoot: cfg.apiRoot,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  let poller: TelegramPoller | undefined;
  /** Readiness of the inbound side: set once `start` registered the webhook or started polling. */
  let webhookReady = false;

  async function call<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toChannelApiError(err, method, cfg.token);
    }
  }

  /** Normalizes one update and hands it to the host; the result is what the webhook answers. */
  async function handleUpdate(host: ChannelHost, bot: BotIdentity, update: TelegramUpdate): Promise<Record<string, unknown>> {
    const normalized = normalizeUpdate(update, { channelId: CHANNEL_ID, bot, groups: cfg.groups });
    if (normalized.kind === 'skip') {
      logger.debug({ updateId: update.update_id, reason: normalized.reason }, 'telegram update ignored');
      return { ok: true, ignored: normalized.reason };
    }
    const result = await host.receive(CHANNEL_ID, normalized.message);
    if (normalized.kind === 'button') await answerButton(normalized, result);
    return result.kind === 'ignored' ? { ok: true, ignored: result.reason } : { ok: true, result: result.kind };
  }

  /**
   * Answers a button click: the command's reply as a toast (Telegram shows a
   * spinner until the query is answered), and the message edited to the
   * result's `edit` (buttons removed) when the command changed something.
   * Failures are logged: the click itself was handled.
   */
  async function answerButton(b: { callbackId: string; chatId: number; messageId: number }, result: ReceiveResult): Promise<void> {
    const reply = result.kind === 'command' ? result.reply : result.kind === 'ignored' ? 'Not allowed here.' : '';
    await call('answerCallbackQuery', () => api.answerCallbackQuery(b.callbackId, reply ? { text: reply.slice(0, 200) } : {})).catch((err: unknown) =>
      logger.warn({ err }, 'could not answer the button click'),
    );
    if (result.kind === 'command' && result.edit) {
      await call('editMessageText', () => api.editMessageText(b.chatId, b.messageId, result.edit!.slice(0, 4096))).catch((err: unknown) =>
        logger.warn({ err }, 'could not edit the message of the button'),
      );
    }
  }

  return {
    id: CHANNEL_ID,
    settings: { ...(cfg.policy && { policy: cfg.policy }), allowedUsers: cfg.allowedUsers, allowedChats: cfg.allowedChats, admins: cfg.admins },
    outbound,

    async start(host: ChannelHost) {
      const me = await call('getMe', () => api.getMe());
      const bot: BotIdentity = { id: me.id, username: me.username };
      if (cfg.registerCommands) {
        await call('setMyCommands', () => api.setMyCommands(COMMANDS)).catch((err: unknown) => logger.warn({ err }, 'could not register the bot commands'));
      }
      if (cfg.mode === 'webhook') {
        registerWebhookRoute(host.routes, {
          path: cfg.webhookPath,
          secret: cfg.webhookSecret as string,
          handle: (update) => handleUpdate(host, bot, update),
        });
        if (cfg.webhookUrl) {
          await call('setWebhook', () =>
            api.setWebhook(cfg.webhookUrl as string, { secret_token: cfg.webhookSecret as string, allowed_updates: ['message', 'callback_query'] }),
          );
        }
        webhookReady = true;
        logger.info({ path: cfg.webhookPath, bot: bot.username }, 'telegram webhook ready');
        return;
      }
      const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
      poller = new TelegramPoller({
        api,
        lease: new RedisLease(deps.redis, channelKeys(deps.prefix, CHANNEL_ID).poller, owner, cfg.pollingLeaseMs),
        token: cfg.token,
        pollTimeoutSeconds: cfg.pollTimeoutSeconds,
        logger,
        handle: async (raw) => {
          const parsed = telegramUpdateSchema.safeParse(raw);
          if (!parsed.success) {
            logger.warn({ issues: parsed.error.issues.slice(0, 3) }, 'telegram sent an update steerbot cannot read; skipped');
            return;
          }
          try {
            await handleUpdate(host, bot, parsed.data);
          } catch (err) {
            // Bad input stays bad on a retry: skip it. Anything else (Redis down) is retried.
            if (!(err instanceof InvalidInputError)) throw err;
            logger.warn({ err, updateId: parsed.data.update_id }, 'telegram update rejected; skipped');
          }
        },
      });
      poller.start();
      logger.info({ bot: bot.username, owner }, 'telegram long polling started (one host polls at a time)');
    },

    async stop() {
      webhookReady = false;
      await poller?.stop();
      poller = undefined;
    },

    ready() {
      if (cfg.mode === 'webhook') return webhookReady ? { ready: true } : { ready: false, detail: 'webhook not registered' };
      return poller ? poller.state() : { ready: false, detail: 'poller not started' };
    },
  };
}
