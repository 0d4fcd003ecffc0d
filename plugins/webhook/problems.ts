/**
 * What the console lists as stuck in a webhook conversation: callbacks
 * behind (the newest reply is over a minute old and past the receiver's
 * cursor) and replies whose callback was given up. One round of reads.
 */
import { type RedisClient, storage } from 'steerbot/plugin';
import { cursorKey, givenUpKey } from './keys.js';

/** A reply not taken by the receiver this long after it was stored counts as behind, in ms. */
const BEHIND_AFTER_MS = 60_000;

/** The `conversationProblems` of a webhook channel. `now`: clock, ms since the epoch. */
export function callbackProblems(redis: RedisClient, prefix: string, now: () => number = Date.now): (conversationId: string) => Promise<string[]> {
  return async (conversationId) => {
    const [cursor, last, givenUpCount] = await Promise.all([
      redis.get(cursorKey(prefix, conversationId)),
      redis.xrevrange(storage.replyStreamKey(prefix, conversationId), '+', '-', 'COUNT', 1),
      redis.hget(givenUpKey(prefix, conversationId), 'count'),
    ]);
    const out: string[] = [];
    const lastId = last[0]?.[0];
    if (cursor && lastId && compareIds(cursor, lastId) < 0 && Number(lastId.split('-')[0]) < now() - BEHIND_AFTER_MS) out.push('callbacks behind');
    const givenUp = Number(givenUpCount);
    if (givenUp > 0) out.push(`${givenUp} ${givenUp === 1 ? 'callback' : 'callbacks'} given up`);
    return out;
  };
}

/** Orders stream ids. */
function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number);
  const [bm, bs] = b.split('-').map(Number);
  return am! - bm! || as! - bs!;
}
