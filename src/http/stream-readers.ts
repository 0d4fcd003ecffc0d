/**
 * Server-sent event bodies fed by `XREAD BLOCK` on a Redis connection of
 * their own (a blocked read would stall every other command on a shared
 * one). Shared by the channels that serve event streams (web chat, webhook).
 */
import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/connection.js';

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

/** A place held for one reader from the request's check until its stream begins (`BlockingReaders.hold`). */
export interface ReaderPlace {
  /** Gives the place back (the request failed before its stream began). Idempotent. */
  release(): void;
}

/** The open blocking readers of one channel, so they can be counted, capped and ended on shutdown. */
export class BlockingReaders {
  private readonly open = new Set<() => void>();
  private held = 0;

  /** Readers open now, and places held for streams about to begin. */
  get size(): number {
    return this.open.size + this.held;
  }

  /**
   * Holds a place for one more reader when fewer than `max` are open or held,
   * else undefined (the caller answers 503). Counted and held in one step, so
   * requests arriving together cannot all pass the check. The place goes to
   * `sse`, or back when `signal` aborts first (the client left before its
   * stream began) or on `release()`.
   */
  hold(max: number, signal: AbortSignal): ReaderPlace | undefined {
    if (this.size >= max || signal.aborted) return undefined;
    this.held++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.held--;
      signal.removeEventListener('abort', release);
    };
    signal.addEventListener('abort', release, { once: true });
    return { release };
  }

  /** Ends every open reader (shutdown); each body ends at once. */
  closeAll(): void {
    for (const end of [...this.open]) end();
  }

  /**
   * An SSE body in the place `hold` gave: `: connected`, then for each `read`
   * on a duplicate of `shared` what `onReply` makes of it, or a keep-alive
   * comment when the read came back empty; until `signal` aborts or
   * `closeAll`. A failed read ends the body after `onError` (must not throw).
   */
  async *sse(
    place: ReaderPlace,
    shared: RedisClient,
    signal: AbortSignal,
    read: (conn: RedisClient) => Promise<XreadReply>,
    onReply: (reply: NonNullable<XreadReply>) => Iterable<string>,
    onError: (err: unknown) => void,
  ): AsyncGenerator<string> {
    place.release(); // counted as open from here
    if (signal.aborted) return;
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
