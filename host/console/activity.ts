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
import type { RedisClient } from '../../src/redis/connection.js';

/** Most conversations the index keeps. */
export const RECENT_CAP = 10_000;

/** Key of the index. */
export function recentKey(prefix: string): string {
  return `${prefix}:console:recent`;
}

/** How long notes gather before one write takes them all, in ms. */
const FLUSH_AFTER_MS = 200;

/**
 * Records conversations' activity in the index, a batch at a time: notes of
 * the same fraction of a second share one round trip (ZADD of all of them,
 * then the trim), so the busiest ingest path pays for at most a few writes a
 * second, not one per message. Fire-and-forget: never delays or fails ingest.
 */
export class ActivityIndex {
  private readonly pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Notes activity of `conversationId` now; written within about `FLUSH_AFTER_MS`. */
  note(conversationId: string): void {
    this.pending.set(conversationId, this.now());
    this.timer ??= setTimeout(() => void this.flush(), FLUSH_AFTER_MS).unref();
  }

  /** Writes what is noted (shutdown calls it so the last notes are not lost). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return this.flushing;
    const members = [...this.pending].flatMap(([id, at]) => [at, id]);
    this.pending.clear();
    const key = recentKey(this.prefix);
    this.flushing = this.flushing.then(() =>
      this.redis
        .pipeline()
        .zadd(key, ...members)
        .zremrangebyrank(key, 0, -(RECENT_CAP + 1))
        .exec()
        .then(
          () => undefined,
          (err: unknown) => this.logger.debug({ err }, 'console activity index not updated'),
        ),
    );
    return this.flushing;
  }
}
