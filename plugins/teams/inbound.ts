/**
 * The Teams channel's inbound side: each checked activity's conversation
 * reference (its service URL) is kept for the outbound side, then a message
 * is normalized and handed to the host. A click on one of the bot's card
 * buttons is answered here, as other channels answer theirs: the command's
 * reply as a message in the conversation, and the card replaced by the
 * result's text (buttons gone) when the command changed something.
 */
import type { ChannelHost, ChannelOutbound, InboundMessage, ReceiveResult } from 'steerbot/channel';
import { type Logger, type RedisClient, storage } from 'steerbot/plugin';
import type { TeamsActivity } from './activity-schema.js';
import { referenceKey } from './keys.js';
import { conversationIdOf, normalizeActivity } from './normalize.js';

/** How long a conversation reference is kept after the conversation's newest activity, in seconds (idle retention may end it sooner). */
const REFERENCE_TTL_SECONDS = 90 * 24 * 3600;

/** What the inbound side needs. */
export interface TeamsInboundOptions {
  channelId: string;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** Answers clicks. */
  outbound: ChannelOutbound;
}

/** The inbound side of one Teams channel. */
export class TeamsInbound {
  constructor(private readonly o: TeamsInboundOptions) {}

  /** Handles one checked activity; the result is the 200 body. */
  async handle(host: ChannelHost, activity: TeamsActivity): Promise<Record<string, unknown>> {
    // Kept first: the reply (or a command's answer, sent inside `receive`) goes to this service URL.
    await this.keepReference(activity);
    const normalized = normalizeActivity(this.o.channelId, activity);
    if (normalized.kind === 'skip') {
      this.o.logger.debug({ type: activity.type, reason: normalized.reason, id: activity.id }, 'teams activity ignored');
      return { ok: true, ignored: normalized.reason };
    }
    const { message } = normalized;
    const result = await host.receive(this.o.channelId, message);
    if (message.interaction === 'button') await this.answerClick(message, activity.replyToId, result);
    return result.kind === 'ingested' ? { ok: true, result: result.result.kind } : { ok: true, result: result.kind };
  }

  private async keepReference(a: TeamsActivity): Promise<void> {
    const key = referenceKey(this.o.prefix, conversationIdOf(this.o.channelId, a.conversation.id));
    try {
      await this.o.redis.set(key, a.serviceUrl, 'EX', REFERENCE_TTL_SECONDS);
    } catch (err) {
      throw storage.asRedisUnavailable(err);
    }
  }

  /** Shows a click's outcome. Failures are logged: the click itself was handled. A repeated click is not answered again. */
  private async answerClick(message: InboundMessage, cardId: string | undefined, result: ReceiveResult): Promise<void> {
    if (result.kind === 'command' && result.duplicate) return;
    const reply = result.kind === 'command' ? result.reply : result.kind === 'ignored' ? 'Not allowed here.' : '';
    const { conversationId } = message;
    if (reply) {
      await this.o.outbound
        .send(conversationId, reply, { format: 'plain' })
        .catch((err: unknown) => this.o.logger.warn({ err }, 'could not answer the button click'));
    }
    if (result.kind === 'command' && result.edit && cardId !== undefined && this.o.outbound.edit) {
      await this.o.outbound
        .edit(conversationId, cardId, result.edit, { format: 'plain' })
        .catch((err: unknown) => this.o.logger.warn({ err }, 'could not update the card of the button'));
    }
  }
}
