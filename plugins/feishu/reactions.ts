/**
 * Status reactions on the person's messages (`im.messageReaction.create` /
 * `.delete`), for the outbound side's `react`. The platform keeps every
 * reaction and names each by a `reaction_id`, so the bot's own are kept in
 * Redis (`reactionsKey`: one field per message and emoji type): a status
 * already shown is not added again (a takeover repeats it), and an answer or
 * a failure takes the bot's other statuses off (`staleReactions`). A
 * process that dies between an add and its record leaves that one reaction
 * unknown: a takeover adds it again and cannot take the first off.
 *
 * The record is bounded: it holds the conversation's last
 * FEISHU_REACTIONS_KEPT reactions, and adding one past that forgets the
 * oldest (`reaction-keep-2.lua`, in the order `reactionsOrderKey` keeps). A
 * message's final status stays recorded for a while rather than being
 * forgotten once shown (as on Matrix, whose transaction ids make a repeat
 * harmless): here the record is the only thing that keeps a repeat from
 * adding a second reaction, and a failed message a follow-up run answers
 * still needs its failure's id to take it off. Both concern the newest
 * messages (a takeover repeats the statuses of the run it takes over; a
 * follow-up run comes right after the failure), which the window covers.
 * The cost, past the window: a message older than the last
 * FEISHU_REACTIONS_KEPT reactions (a run that took more messages than that
 * at once) keeps a stale status beside its new one, and a repeat on it adds
 * a second reaction.
 */
import type { Client } from '@larksuiteoapi/node-sdk';
import { type ReactionStatus, type RedisClient, staleReactions, storage } from 'steerbot/plugin';
import { FeishuApiError, feishuError } from './errors.js';
import { reactionsKey, reactionsOrderKey } from './keys.js';

/** Most of the bot's reactions recorded per conversation; the oldest are forgotten past it. */
export const FEISHU_REACTIONS_KEPT = 100;

/** Records a reaction and forgets the oldest past the bound (`reaction-keep-2.lua`). */
const keepScript = storage.defineScript(new URL('./reaction-keep-2.lua', import.meta.url));

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
  const order = reactionsOrderKey(o.prefix, conversationId);
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
    await keepScript.run(o.redis, [key, order], [field(shown), id, FEISHU_REACTIONS_KEPT]);
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
    await o.redis.multi().hdel(key, field(stale)).zrem(order, field(stale)).exec();
  }
}
