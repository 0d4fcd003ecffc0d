/**
 * Status reactions on the person's messages (`m.reaction` annotations), for
 * the outbound side's `react`.
 */
import type { ReactionStatus, RedisClient } from 'steerbot/plugin';
import { type MatrixClient, seg } from './client.js';
import { reactionsKey } from './keys.js';
import { eventIdOf, txnIdOf } from './send.js';

/**
 * Shows `status` on a message: an `m.reaction` annotation with the status's
 * emoji, after which the bot's previous one on that message is redacted.
 * The transaction ids come from the message, the status and the reaction it
 * replaces (`answered`, the last, from the message and status alone), so a
 * repeat (a takeover) makes no second reaction, while a status shown again
 * later (taken, failed, taken again by a follow-up run) is a new one. The bot's reaction is kept in Redis until the message is answered,
 * the last status, which nothing replaces.
 */
export async function react(
  o: { client: MatrixClient; redis: RedisClient; prefix: string },
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
  // `answered` is shown once per message (its repeat finds no previous reaction in Redis, yet is the same send).
  const txnId = txnIdOf(status === 'answered' ? `react:${messageId}:${status}` : `react:${messageId}:${status}:${previousId ?? ''}`);
  const answer = await o.client.call('reaction', 'PUT', `rooms/${seg(roomId)}/send/m.reaction/${seg(txnId)}`, { body: content });
  // Redacted before Redis forgets it: a failed redaction is retried with the next call.
  if (previousId) {
    const redaction = txnIdOf(`unreact:${previousId}`);
    await o.client.call('redact reaction', 'PUT', `rooms/${seg(roomId)}/redact/${seg(previousId)}/${seg(redaction)}`, { body: {} });
  }
  if (status === 'answered') await o.redis.hdel(key, messageId);
  else await o.redis.hset(key, messageId, `${status}:${eventIdOf(answer)}`);
}
