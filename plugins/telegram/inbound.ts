/**
 * The Telegram channel's inbound side: updates by webhook (a route on the
 * host's server, registered with Telegram when `webhookUrl` is set) or by
 * long polling (one polling host across all hosts, by a Redis lease),
 * normalized and handed to the host; a button click is answered here. Its
 * state (the poller, the webhook's readiness) is declared as fields.
 * The webhook's secret token carries no time, so a webhook message whose
 * `date` is older than the dedupe window less a margin is dropped unanswered
 * (a captured update replayed after its dedupe key expired would otherwise
 * be answered again); polled updates come from Telegram itself and are not.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Api } from 'grammy';
import type { Logger } from 'pino';
import type { ChannelDeps, ChannelHost, ReceiveResult } from 'steerbot/channel';
import { InvalidInputError, pluginMetrics, replayWindowSeconds, staleDelivery, storage } from 'steerbot/plugin';
import type { TelegramConfig } from './config.js';
import { toChannelApiError } from './errors.js';
import { type BotIdentity, normalizeUpdate } from './normalize.js';
import { linkPreviewsOf } from './outbound.js';
import { telegramPoller } from './poller.js';
import { type TelegramUpdate, telegramUpdateSchema } from './update-schema.js';
import { registerWebhookRoute } from './webhook.js';

/** The control commands shown in Telegram's command menu. */
const COMMANDS = [
  { command: 'stop', description: 'Stop the current answer' },
  { command: 'new', description: 'Start a fresh conversation' },
  { command: 'compact', description: 'Summarize the conversation so far' },
  { command: 'queue', description: 'How messages sent while I work are handled: steer, followup, collect, interrupt, supersede' },
  { command: 'status', description: 'What I am doing now' },
];

/** Webhook updates dropped as too old to answer (`steerbot_telegram_stale_updates_total`), by reason. */
const staleUpdates = pluginMetrics('telegram').counter(
  'stale_updates_total',
  "Telegram webhook updates dropped unanswered because their message's date is older than the dedupe window less a margin, or missing.",
  ['reason'],
);

/** The inbound side of one Telegram channel plugin. */
export class TelegramInbound {
  private poller: ReturnType<typeof telegramPoller> | undefined;
  /** Readiness of the webhook: set once `start` registered it. */
  private webhookReady = false;

  constructor(
    private readonly channelId: string,
    private readonly cfg: TelegramConfig,
    private readonly api: Api,
    private readonly deps: ChannelDeps,
    private readonly logger: Logger,
  ) {}

  /** Reads the bot's identity, registers the command menu, then serves the webhook or starts polling. */
  async start(host: ChannelHost): Promise<void> {
    const me = await this.call('getMe', () => this.api.getMe());
    const bot: BotIdentity = { id: me.id, username: me.username };
    if (this.cfg.registerCommands) {
      await this.call('setMyCommands', () => this.api.setMyCommands(COMMANDS)).catch((err: unknown) =>
        this.logger.warn({ err }, 'could not register the bot commands'),
      );
    }
    if (this.cfg.mode === 'webhook') await this.startWebhook(host, bot);
    else this.startPolling(host, bot);
  }

  /** Stops polling (the webhook route stays with the server, which stops with the host). */
  async stop(): Promise<void> {
    this.webhookReady = false;
    await this.poller?.stop();
    this.poller = undefined;
  }

  /** Readiness as `/readyz` reports it. */
  ready(): { ready: boolean; detail?: string } {
    if (this.cfg.mode === 'webhook') return this.webhookReady ? { ready: true } : { ready: false, detail: 'webhook not registered' };
    return this.poller ? this.poller.state() : { ready: false, detail: 'poller not started' };
  }

  private async startWebhook(host: ChannelHost, bot: BotIdentity): Promise<void> {
    const { cfg } = this;
    registerWebhookRoute(host.routes, {
      path: cfg.webhookPath,
      secret: cfg.webhookSecret as string,
      handle: (update) => this.handleWebhookUpdate(host, bot, update, replayWindowSeconds(host.dedupeTtlSeconds)),
    });
    if (cfg.webhookUrl) {
      await this.call('setWebhook', () =>
        this.api.setWebhook(cfg.webhookUrl as string, { secret_token: cfg.webhookSecret as string, allowed_updates: ['message', 'callback_query'] }),
      );
    }
    this.webhookReady = true;
    this.logger.info({ path: cfg.webhookPath, bot: bot.username }, 'telegram webhook ready');
  }

  private startPolling(host: ChannelHost, bot: BotIdentity): void {
    const { cfg, deps, logger } = this;
    const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.poller = telegramPoller({
      api: this.api,
      lease: new storage.RedisLease(deps.redis, storage.pluginStorage(deps.prefix, this.channelId).key('poller'), owner, cfg.pollingLeaseMs),
      token: cfg.token,
      pollTimeoutSeconds: cfg.pollTimeoutSeconds,
      logger,
      handle: (raw) => this.handlePolled(host, bot, raw),
    });
    this.poller.start();
    logger.info({ bot: bot.username, owner }, 'telegram long polling started (one host polls at a time)');
  }

  /** One polled update: an unreadable one or bad input is skipped (it stays bad on a retry); anything else (Redis down) throws, to be retried. */
  private async handlePolled(host: ChannelHost, bot: BotIdentity, raw: unknown): Promise<void> {
    const parsed = telegramUpdateSchema.safeParse(raw);
    if (!parsed.success) {
      this.logger.warn({ issues: parsed.error.issues.slice(0, 3) }, 'telegram sent an update steerbot cannot read; skipped');
      return;
    }
    try {
      await this.handleUpdate(host, bot, parsed.data);
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      this.logger.warn({ err, updateId: parsed.data.update_id }, 'telegram update rejected; skipped');
    }
  }

  /**
   * One webhook update: a message dated outside the replay window (or not
   * dated) is dropped, logged and counted, with nothing written or sent; the
   * webhook still answers 200 so Telegram does not deliver it again. A button
   * click carries no time of its own (its message's `date` is when the bot
   * sent the buttons) and is handled as usual.
   */
  private async handleWebhookUpdate(host: ChannelHost, bot: BotIdentity, update: TelegramUpdate, windowSeconds: number): Promise<Record<string, unknown>> {
    if (update.message) {
      const reason = staleDelivery(update.message.date, windowSeconds);
      if (reason) {
        staleUpdates.inc({ reason });
        this.logger.info({ updateId: update.update_id, date: update.message.date, windowSeconds, reason }, 'telegram update too old to be answered; dropped');
        return { ok: true, ignored: reason };
      }
    }
    return this.handleUpdate(host, bot, update);
  }

  /** Normalizes one update and hands it to the host; the result is what the webhook answers. */
  private async handleUpdate(host: ChannelHost, bot: BotIdentity, update: TelegramUpdate): Promise<Record<string, unknown>> {
    const normalized = normalizeUpdate(update, { channelId: this.channelId, bot, groups: this.cfg.groups });
    if (normalized.kind === 'skip') {
      this.logger.debug({ updateId: update.update_id, reason: normalized.reason }, 'telegram update ignored');
      return { ok: true, ignored: normalized.reason };
    }
    const result = await host.receive(this.channelId, normalized.message);
    if (normalized.kind === 'button') await this.answerButton(normalized, result);
    return result.kind === 'ignored' ? { ok: true, ignored: result.reason } : { ok: true, result: result.kind };
  }

  /**
   * Answers a button click: the command's reply as a toast (Telegram shows a
   * spinner until the query is answered), and the message edited to the
   * result's `edit` (buttons removed) when the command changed something.
   * Failures are logged: the click itself was handled.
   */
  private async answerButton(b: { callbackId: string; chatId: number; messageId: number }, result: ReceiveResult): Promise<void> {
    const reply = result.kind === 'command' ? result.reply : result.kind === 'ignored' ? 'Not allowed here.' : '';
    await this.call('answerCallbackQuery', () => this.api.answerCallbackQuery(b.callbackId, reply ? { text: reply.slice(0, 200) } : {})).catch((err: unknown) =>
      this.logger.warn({ err }, 'could not answer the button click'),
    );
    if (result.kind === 'command' && result.edit) {
      const edit = result.edit;
      const previews = linkPreviewsOf(this.cfg.linkPreviews);
      await this.call('editMessageText', () => this.api.editMessageText(b.chatId, b.messageId, edit.slice(0, 4096), previews)).catch((err: unknown) =>
        this.logger.warn({ err }, 'could not edit the message of the button'),
      );
    }
  }

  /** A Bot API call whose failure becomes a ChannelApiError (the token redacted). */
  private async call<T>(method: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toChannelApiError(err, method, this.cfg.token);
    }
  }
}
