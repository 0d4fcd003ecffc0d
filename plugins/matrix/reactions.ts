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
 * The transaction ids come from the message and status, so a repeat (a
 * takeover) makes no second reaction. Only a `taken` reaction is kept in
 * Redis: the last status of a message replaces it and is not replaced.
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
