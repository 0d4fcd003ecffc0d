/**
 * The console's index of recent conversations: one sorted set per
 * deployment (`<prefix>:console:recent`, score: ms of the last message or
 * command), written by the host after each ingest, capped to the newest
 * `RECENT_CAP`. The conversations page reads a page of it (ZREVRANGE), never
 * a SCAN of the keyspace. It is written outside the ingest script because a
 * deployment-wide key cannot share a conversation's Cluster slot; a lost
 * write only delays a conversation's appearance until its next message.
 */
import type { Logger } from 'pino';
import type { RedisClient } from '../../src/redis.js';

/** Most conversations the index keeps. */
export const RECENT_CAP = 10_000;

/** Key of the index. */
export function recentKey(prefix: string): string {
  return `${prefix}:console:recent`;
}

/** Records activity of `conversationId` now; fire-and-forget: never delays or fails ingest. */
export function noteActivity(redis: RedisClient, prefix: string, conversationId: string, logger: Logger, now = Date.now()): void {
  const key = recentKey(prefix);
  redis
    .pipeline()
    .zadd(key, now, conversationId)
    .zremrangebyrank(key, 0, -(RECENT_CAP + 1))
    .exec()
    .catch((err: unknown) => logger.debug({ err }, 'console activity index not updated'));
}
