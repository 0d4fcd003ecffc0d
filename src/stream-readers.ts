/**
 * Server-sent event bodies fed by `XREAD BLOCK` on a Redis connection of
 * their own (a blocked read would stall every other command on a shared
 * one). Shared by the channels that serve event streams (web chat, webhook).
 */
import { Cluster } from 'ioredis';
import type { RedisClient } from './redis.js';

/** One batch of an `XREAD` reply: `[key, [[id, fields]]]` per stream, null after a block with nothing new. */
export type XreadReply = Array<[string, Array<[string, string[]]>]> | null;

/**
 * A connection of its own for blocking reads, from `shared`'s settings (a
 * blocked read would stall every other command on a shared one). Its errors
 * come back through the failing read; `disconnect()` ends a blocked read at once.
 */
export function blockingConnection(shared: RedisClient): RedisClient {
  const conn: RedisClient = shared instanceof Cluster ? shared.duplicate() : shared.duplicate(); // two overloads: the union has no common signature
  conn.on('error', () => undefined);
  return conn;
}

/** The open blocking readers of one channel, so they can be counted and ended on shutdown. */
export class BlockingReaders {
  private readonly open = new Set<() => void>();

  /** Readers open now. */
  get size(): number {
    return this.open.size;
  }

  /** Ends every open reader (shutdown); each body ends at once. */
  closeAll(): void {
    for (const end of [...this.open]) end();
  }

  /**
   * An SSE body: `: connected`, then for each `read` on a duplicate of `shared`
   * what `onReply` makes of it, or a keep-alive comment when the read came back
   * empty; until `signal` aborts or `closeAll`. A failed read ends the body
   * after `onError` (must not throw).
   */
  async *sse(
    shared: RedisClient,
    signal: AbortSignal,
    read: (conn: RedisClient) => Promise<XreadReply>,
    onReply: (reply: NonNullable<XreadReply>) => Iterable<string>,
    onError: (err: unknown) => void,
  ): AsyncGenerator<string> {
    const conn = blockingConnection(shared);
    let open = true;
    // Ending disconnects the connection, which ends a blocked XREAD at once.
    const end = () => {
      if (!open) return;
      open = false;
      this.open.delete(end);
      conn.disconnect();
    };
    this.open.add(end);
    signal.addEventListener('abort', end, { once: true });
    try {
      yield ': connected\n\n';
      while (open) {
        const r = await read(conn);
        if (!open) break;
        if (r) yield* onReply(r);
        else yield ': keep-alive\n\n';
      }
    } catch (err) {
      if (open) onError(err);
    } finally {
      signal.removeEventListener('abort', end);
      end();
    }
  }
}
