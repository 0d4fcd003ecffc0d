/**
 * The Slack channel's inbound side: events and button clicks, from Socket
 * Mode or the Events API routes, normalized and handed to the host. A
 * channel thread the bot answered in is remembered (a plugin key of the
 * conversation) so later messages in it need no mention. Its state (the
 * bot's identity, the socket) is declared as fields.
 */
import type { WebClient } from '@slack/web-api';
import type { ChannelHost, ReceiveResult } from 'steerbot/channel';
import { ChannelApiError, InvalidInputError, type Logger, storage } from 'steerbot/plugin';
import { call } from './api.js';
import { textBlock } from './blocks.js';
import { parseConversationId, THREAD_KEY } from './conversation.js';
import { slackBlockActionsSchema, slackMessageEventSchema } from './event-schema.js';
import { escapeText } from './mrkdwn.js';
import { type BotIdentity, normalizeClick, normalizeMessage } from './normalize.js';

/** How long a thread stays known without a new message in it, in seconds (refreshed by every message). */
const THREAD_TTL_SECONDS = 30 * 24 * 3600;

/** What handling one event or click did (the Events API answers it as JSON). */
export type Handled = { ok: true; result?: string; ignored?: string };

/** Reads a zod result, or throws InvalidInputError naming the first problem (answered 400, nothing written). */
function parsed<T>(r: { success: true; data: T } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } }, what: string): T {
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new InvalidInputError(`bad ${what}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
}

/** The inbound side of one Slack channel plugin. */
export class SlackInbound {
  /** The bot, once `identify` ran. */
  bot: BotIdentity | undefined;

  constructor(
    private readonly channelId: string,
    private readonly web: WebClient,
    private readonly token: string,
    private readonly keys: storage.PluginStorage,
    private readonly logger: Logger,
  ) {}

  /** Reads the bot's user id (`auth.test`): mentions of it address the bot, its own messages are skipped. */
  async identify(): Promise<BotIdentity> {
    const me = await call('auth.test', () => this.web.auth.test(), this.token);
    if (!me.user_id) throw new ChannelApiError('slack auth.test named no bot user');
    this.bot = { userId: me.user_id, ...(me.bot_id && { botId: me.bot_id }) };
    return this.bot;
  }

  /** One event of an `event_callback`: a message or a mention becomes an update; anything else is ignored, without writes. */
  async handleEvent(host: ChannelHost, event: { type: string }): Promise<Handled> {
    if (event.type !== 'message' && event.type !== 'app_mention') return { ok: true, ignored: 'event-type' };
    const e = parsed(slackMessageEventSchema.safeParse(event), 'event');
    const n = normalizeMessage(e, this.channelId, this.requireBot());
    if (n.kind === 'skip') return { ok: true, ignored: n.reason };
    const marker = this.keys.conversationKey(n.message.conversationId, THREAD_KEY);
    if (n.threadOnly && !(await storage.redisCall(() => host.redis.exists(marker)))) return { ok: true, ignored: 'not-addressed' };
    const result = await host.receive(this.channelId, n.message);
    if (result.kind === 'ignored') return { ok: true, ignored: result.reason };
    if (n.message.group) await storage.redisCall(() => host.redis.set(marker, '1', 'EX', THREAD_TTL_SECONDS));
    return { ok: true, result: result.kind };
  }

  /** One interactivity payload: a click on our buttons runs its command; other interactions are ignored. */
  async handleInteraction(host: ChannelHost, payload: { type: string }): Promise<Handled> {
    if (payload.type !== 'block_actions') return { ok: true, ignored: 'interaction-type' };
    const click = normalizeClick(parsed(slackBlockActionsSchema.safeParse(payload), 'payload'), this.channelId);
    if (!click) return { ok: true, ignored: 'not-our-button' };
    const result = await host.receive(this.channelId, click.message);
    await this.answerClick(click, result);
    return result.kind === 'ignored' ? { ok: true, ignored: result.reason } : { ok: true, result: result.kind };
  }

  /**
   * Shows a click's outcome: the command's reply to the clicking user only
   * (ephemeral), and the message edited to the result's `edit` (buttons
   * removed) when the command changed something. Failures are logged: the
   * click itself was handled.
   */
  private async answerClick(
    c: { channel: string; messageTs: string | undefined; userId: string; message: { conversationId: string } },
    result: ReceiveResult,
  ): Promise<void> {
    // Both are plain text holding what the model wrote (an option's label): escaped, so no markup in them pings anyone.
    const reply = escapeText(result.kind === 'command' ? result.reply : result.kind === 'ignored' ? 'Not allowed here.' : '');
    const thread = parseConversationId(this.channelId, c.message.conversationId).threadTs;
    if (reply) {
      await call(
        'chat.postEphemeral',
        () => this.web.chat.postEphemeral({ channel: c.channel, user: c.userId, text: reply, ...(thread !== undefined && { thread_ts: thread }) }),
        this.token,
      ).catch((err: unknown) => this.logger.warn({ err }, 'could not answer the button click'));
    }
    if (result.kind === 'command' && result.edit && c.messageTs !== undefined) {
      const edit = escapeText(result.edit);
      const ts = c.messageTs;
      await call('chat.update', () => this.web.chat.update({ channel: c.channel, ts, text: edit, blocks: [textBlock(edit)] }), this.token).catch(
        (err: unknown) => this.logger.warn({ err }, 'could not edit the message of the button'),
      );
    }
  }

  private requireBot(): BotIdentity {
    if (!this.bot) throw new Error('slack channel not started');
    return this.bot;
  }
}
