/**
 * Status reactions on the person's messages (`im.messageReaction.create` /
 * `.delete`), for the outbound side's `react`. The platform keeps every
 * reaction and names each by a `reaction_id`, so the bot's own are kept in
 * Redis (`reactionsKey`: one field per message and emoji type): a status
 * already shown is not added again (a takeover repeats it), and an answer or
 * a failure takes the bot's other statuses off (`staleReactions`). A
 * process that dies between an add and its record leaves that one reaction
 * unknown: a takeover adds it again and cannot take the first off.
 */
import type { Client } from '@larksuiteoapi/node-sdk';
import { type ReactionStatus, type RedisClient, staleReactions } from 'steerbot/plugin';
import { FeishuApiError, feishuError } from './errors.js';
import { reactionsKey } from './keys.js';

/** What `react` needs of the outbound side. */
export interface ReactDeps {
  client: Client;
  redis: RedisClient;
  prefix: string;
  rateLimitRetryMs: number;
}

type Answer = { code?: number | undefined; msg?: string | undefined; data?: { reaction_id?: string | undefined } | undefined };

/** The answer's error (a non-zero `code` in a 200), if any. */
function check(what: string, answer: Answer, rateLimitRetryMs: number): Answer {
  if (answer.code !== undefined && answer.code !== 0) throw feishuError(what, 200, answer, new Headers(), [], rateLimitRetryMs);
  return answer;
}

/**
 * Shows `status` on message `messageId`: adds the status's emoji type unless
 * the bot's is there already, then takes off the bot's stale ones. Throws
 * FeishuApiError when the platform refuses (a rate limit with `retryAfterMs`).
 */
export async function react(
  o: ReactDeps,
  emoji: Record<ReactionStatus, string>,
  conversationId: string,
  messageId: string,
  status: ReactionStatus,
): Promise<void> {
  const key = reactionsKey(o.prefix, conversationId);
  const field = (type: string) => `${messageId}:${type}`;
  const shown = emoji[status];
  if ((await o.redis.hget(key, field(shown))) === null) {
    const answer = check(
      'reaction',
      await o.client.im.messageReaction.create({ path: { message_id: messageId }, data: { reaction_type: { emoji_type: shown } } }),
      o.rateLimitRetryMs,
    );
    const id = answer.data?.reaction_id;
    if (typeof id !== 'string' || id === '') throw new FeishuApiError('feishu reaction: the answer named no reaction id', { status: 502 });
    await o.redis.hset(key, field(shown), id);
  }
  for (const stale of staleReactions(emoji, status)) {
    const id = await o.redis.hget(key, field(stale));
    if (id === null) continue;
    try {
      check('reaction delete', await o.client.im.messageReaction.delete({ path: { message_id: messageId, reaction_id: id } }), o.rateLimitRetryMs);
    } catch (err) {
      // A refusal other than a rate limit means it is gone already (the message was recalled): nothing is left to take off.
      if (!(err instanceof FeishuApiError) || err.status === undefined || err.status === 429 || err.status >= 500) throw err;
    }
    await o.redis.hdel(key, field(stale));
  }
}
