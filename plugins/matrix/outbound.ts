/**
 * The Matrix channel's outbound side: `m.text` messages, replies, edits for
 * streaming (`m.replace`), typing, status reactions (`m.reaction`) and who
 * moderates a room (power levels), over the client-server API.
 *
 * A message is sent with `PUT …/send/m.room.message/{txnId}` and the
 * delivery key as its transaction id: the homeserver answers a repeated
 * transaction id of the same access token with the event it already made,
 * so a takeover's resend of a message whose outcome was never recorded
 * (`maybeSentSince`) is not shown twice. Homeservers keep transaction ids
 * for a while only (Synapse: about 30 minutes), ample for a takeover.
 *
 * Text goes out as written (`body` only): no Markdown converter is among
 * the dependencies, and clients show a plain body as it is. Buttons have no
 * Matrix equivalent: the text says what to send instead.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { ChannelOutbound, SendOptions } from 'steerbot/channel';
import { InvalidInputError, type ReactionStatus, type ReactionsSetting, type RedisClient } from 'steerbot/plugin';
import { type MatrixClient, seg } from './client.js';
import { MatrixApiError } from './errors.js';
import { reactionsKey } from './keys.js';
import { roomOf } from './normalize.js';

/**
 * Longest message, in characters. An event may be at most 65 536 bytes of
 * JSON, envelope and signatures included; 16 000 characters of text are at
 * most 48 000 bytes of UTF-8 (3 bytes per UTF-16 unit), and an edit carries
 * the new text once in full (its fallback `body` is cut short).
 */
export const MATRIX_MAX_MESSAGE_CHARS = 16_000;
/** Longest fallback `body` of an edit (clients that do not apply edits show it), in characters. */
const EDIT_FALLBACK_CHARS = 1000;
/** How long one typing notification shows unless renewed, in ms: delivery renews it every few seconds while a run works, and it ends soon after. */
const TYPING_TIMEOUT_MS = 10_000;

/** Options of `createMatrixOutbound`. */
export interface MatrixOutboundOptions {
  channelId: string;
  client: MatrixClient;
  /** The bot's user id (typing is shown as it). */
  selfId: string;
  redis: RedisClient;
  prefix: string;
  /** Least time between streaming edits, in ms; absent: no streaming. */
  streamEditIntervalMs?: number;
  /** Status reactions on the person's messages; absent or false: none. */
  reactions?: ReactionsSetting;
}

/** A transaction id made from `key` (URL-safe, the same on every retry). */
export const txnIdOf = (key: string): string => `sb-${createHash('sha256').update(key).digest('base64url').slice(0, 32)}`;

/** The room of a conversation; throws InvalidInputError for one that is not this channel's. */
function roomIdOf(channelId: string, conversationId: string): string {
  const roomId = roomOf(channelId, conversationId);
  if (roomId === undefined) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return roomId;
}

function checkLength(text: string): void {
  if (text.length > MATRIX_MAX_MESSAGE_CHARS) throw new InvalidInputError(`a Matrix message holds at most ${MATRIX_MAX_MESSAGE_CHARS} characters here`);
}

/** The `event_id` of a send's answer. */
function eventIdOf(answer: Record<string, unknown>): string {
  if (typeof answer.event_id !== 'string' || answer.event_id === '') throw new MatrixApiError('matrix send: the answer named no event id', { status: 502 });
  return answer.event_id;
}

/**
 * Whether `userId` moderates the room by its `m.room.power_levels` content:
 * a power level (`users`, else `users_default`, else 0) at least the one
 * that redacts other people's messages (`redact`, default 50), as Discord's
 * Manage Messages counts there.
 */
export function isModerator(powerLevels: Record<string, unknown>, userId: string): boolean {
  const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
  const users = typeof powerLevels.users === 'object' && powerLevels.users !== null ? (powerLevels.users as Record<string, unknown>) : {};
  return num(users[userId], num(powerLevels.users_default, 0)) >= num(powerLevels.redact, 50);
}

/** Builds the outbound side. Every method throws ChannelApiError (a MatrixApiError; 429: `retryAfterMs`). */
export function createMatrixOutbound(o: MatrixOutboundOptions): ChannelOutbound {
  const { client, channelId } = o;

  async function sendEvent(roomId: string, type: string, txnId: string, content: Record<string, unknown>): Promise<string> {
    return eventIdOf(await client.call(`send ${type}`, 'PUT', `rooms/${seg(roomId)}/send/${seg(type)}/${seg(txnId)}`, { body: content }));
  }

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: MATRIX_MAX_MESSAGE_CHARS,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const roomId = roomIdOf(channelId, conversationId);
      checkLength(text);
      const content: Record<string, unknown> = { msgtype: 'm.text', body: text };
      if (opts.replyTo !== undefined) content['m.relates_to'] = { 'm.in_reply_to': { event_id: opts.replyTo } };
      const txnId = opts.deliveryKey === undefined ? randomUUID() : txnIdOf(opts.deliveryKey);
      return { messageId: await sendEvent(roomId, 'm.room.message', txnId, content) };
    },

    async edit(conversationId: string, messageId: string, text: string) {
      const roomId = roomIdOf(channelId, conversationId);
      checkLength(text);
      const fallback = text.length > EDIT_FALLBACK_CHARS ? `${text.slice(0, EDIT_FALLBACK_CHARS)}…` : text;
      await sendEvent(roomId, 'm.room.message', randomUUID(), {
        msgtype: 'm.text',
        body: `* ${fallback}`,
        'm.new_content': { msgtype: 'm.text', body: text },
        'm.relates_to': { rel_type: 'm.replace', event_id: messageId },
      });
    },

    async isAdmin(conversationId: string, userId: string) {
      const roomId = roomIdOf(channelId, conversationId);
      return isModerator(await client.call('power levels', 'GET', `rooms/${seg(roomId)}/state/m.room.power_levels`), userId);
    },

    async typing(conversationId: string) {
      const roomId = roomIdOf(channelId, conversationId);
      await client.call('typing', 'PUT', `rooms/${seg(roomId)}/typing/${seg(o.selfId)}`, { body: { typing: true, timeout: TYPING_TIMEOUT_MS } });
    },
  };
  if (o.streamEditIntervalMs !== undefined) {
    const interval = o.streamEditIntervalMs;
    outbound.streamEditIntervalMs = () => interval;
  }
  const reactions = o.reactions;
  if (reactions)
    outbound.react = (conversationId, messageId, status) => react(o, reactions, roomIdOf(channelId, conversationId), conversationId, messageId, status);
  return outbound;
}

/**
 * Shows `status` on a message: an `m.reaction` annotation with the status's
 * emoji, after which the bot's previous one on that message is redacted.
 * The transaction ids come from the message and status, so a repeat (a
 * takeover) makes no second reaction. Only a `taken` reaction is kept in
 * Redis: the last status of a message replaces it and is not replaced.
 */
async function react(
  o: MatrixOutboundOptions,
  reactions: Record<ReactionStatus, string>,
  roomId: string,
  conversationId: string,
  messageId: string,
  status: ReactionStatus,
): Promise<void> {
  const key = reactionsKey(o.prefix, conversationId);
  const previous = await o.redis.hget(key, messageId);
  const [previousStatus, previousId] = previous === null ? [] : [previous.slice(0, previous.indexOf(':')), previous.slice(previous.indexOf(':') + 1)];
  if (previousStatus === status) return;
  const content = { 'm.relates_to': { rel_type: 'm.annotation', event_id: messageId, key: reactions[status] } };
  const answer = await o.client.call('reaction', 'PUT', `rooms/${seg(roomId)}/send/m.reaction/${seg(txnIdOf(`react:${messageId}:${status}`))}`, {
    body: content,
  });
  if (status === 'taken') await o.redis.hset(key, messageId, `${status}:${eventIdOf(answer)}`);
  if (previousId) {
    const txnId = txnIdOf(`unreact:${previousId}`);
    await o.client.call('redact reaction', 'PUT', `rooms/${seg(roomId)}/redact/${seg(previousId)}/${seg(txnId)}`, { body: {} });
  }
  if (status !== 'taken') await o.redis.hdel(key, messageId);
}
