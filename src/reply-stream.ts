/**
 * The reply-stream contract: a channel that hands replies to a client by
 * reading them back (a webhook's callbacks and event stream, a browser chat)
 * stores each reply in the conversation's reply stream
 * (`<prefix>:{c:<id>}:replies`, entries with one `data` field) with
 * `storeReply`, once per delivery key: a run attempt that died after storing
 * a reply but before its outbox recorded it sends it again with the same key
 * and finds it stored. Purge deletes the stream and the marks (a notice
 * stored after a purge expires with the tombstone); idle retention expires them.
 */

import type { RedisClient } from './redis/connection.js';
import { conversationKeys } from './redis/keys.js';
import { runScript } from './scripts/index.js';

/** Options of `storeReply`. */
export interface StoreReplyOptions {
  /** Key prefix (config `redis.prefix`). */
  prefix: string;
  /** Approximate length cap of the stream (`XADD MAXLEN ~`), in entries. */
  maxLen: number;
  /** The reply's delivery key (`SendOptions.deliveryKey`); absent: stored without dedupe. */
  deliveryKey?: string;
  /** How long the delivery key is remembered, in seconds (with `deliveryKey`). */
  dedupeSeconds: number;
}

/** What `storeReply` did: `stored`, or `duplicate` (stored before under the delivery key); `id`: the entry's stream id. */
export interface StoreReplyResult {
  duplicate: boolean;
  /** Stream id of the stored entry (of the first copy for a duplicate). */
  id: string;
}

/** Stores `data` (the reply, JSON) in the conversation's reply stream, once per delivery key, in one script. */
export async function storeReply(redis: RedisClient, conversationId: string, data: string, o: StoreReplyOptions): Promise<StoreReplyResult> {
  const k = conversationKeys(o.prefix, conversationId);
  const remember = o.deliveryKey !== undefined;
  const reply = await runScript(
    redis,
    'reply-store',
    [k.replies, k.replyStored(o.deliveryKey ?? '-'), k.tombstone],
    [data, o.maxLen, remember ? Math.max(1, Math.floor(o.dedupeSeconds)) : 0],
  );
  return { duplicate: reply[0] === 'duplicate', id: String(reply[1]) };
}

/** Key of a conversation's reply stream, to read it (`XRANGE`, `XREAD`). Throws InvalidInputError for a bad conversation id. */
export function replyStreamKey(prefix: string, conversationId: string): string {
  return conversationKeys(prefix, conversationId).replies;
}
