/**
 * The Teams channel's inbound side: a checked activity is normalized, and a
 * message's conversation reference (its service URL) is kept for the
 * outbound side before the message is handed to the host, which may answer
 * inside `receive` (a command's reply, a refused stranger's pairing code).
 * Skipped activities keep nothing. A reference is kept long only once the
 * host took a message of the conversation in: until then it lives an hour,
 * so strangers who open many chats leave no lasting keys. A click on one of
 * the bot's card buttons is answered here, as other channels answer theirs:
 * the command's reply as a message in the conversation, and the card
 * replaced by the result's text (buttons gone) when the command changed
 * something.
 */
import type { ChannelHost, ChannelOutbound, InboundMessage, ReceiveResult } from 'steerbot/channel';
import { type Logger, type RedisClient, storage } from 'steerbot/plugin';
import type { TeamsActivity } from './activity-schema.js';
import { referenceKey } from './keys.js';
import { conversationIdOf, normalizeActivity } from './normalize.js';

/** How long a conversation reference is kept after the newest message the host took in, in seconds (idle retention may end it sooner). */
const REFERENCE_TTL_SECONDS = 90 * 24 * 3600;
/**
 * How long the reference of a conversation whose messages the host has not
 * taken in is kept, in seconds: room for the refusal notice and for an
 * approval within a pairing code's default life. Later, a send falls back to
 * the configured `serviceUrl`.
 */
const UNACCEPTED_REFERENCE_TTL_SECONDS = 3600;

/** Whether the host took the message in (access passed, conversation not purged): only then is the reference kept long. */
const accepted = (result: ReceiveResult): boolean => result.kind === 'ingested' && result.result.kind !== 'purged';

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
    const normalized = normalizeActivity(this.o.channelId, activity);
    if (normalized.kind === 'skip') {
      this.o.logger.debug({ type: activity.type, reason: normalized.reason, id: activity.id }, 'teams activity ignored');
      return { ok: true, ignored: normalized.reason };
    }
    const { message } = normalized;
    const key = referenceKey(this.o.prefix, conversationIdOf(this.o.channelId, activity.conversation.id));
    // Kept before `receive`: the reply (or an answer sent inside `receive`) goes to this service URL.
    // One transaction: the key never lives without a TTL, and one kept longer keeps its own.
    await storage.redisCall(() => this.o.redis.multi().set(key, activity.serviceUrl, 'KEEPTTL').expire(key, UNACCEPTED_REFERENCE_TTL_SECONDS, 'NX').exec());
    const result = await host.receive(this.o.channelId, message);
    if (accepted(result)) await storage.redisCall(() => this.o.redis.expire(key, REFERENCE_TTL_SECONDS));
    if (message.interaction === 'button') await this.answerClick(message, activity.replyToId, result);
    return result.kind === 'ingested' ? { ok: true, result: result.result.kind } : { ok: true, result: result.kind };
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
