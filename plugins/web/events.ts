/**
 * The chat page's event stream (server-sent events): the conversation's
 * replies, streaming edits and typing (`event: reply`, from the stream the
 * outbound side writes) and its record as it grows (`event: record`: how each
 * message was dispatched, runs starting and ending, tool calls, steering
 * taken). Both Redis streams carry the conversation's hash tag, so one
 * `XREAD BLOCK` on a connection of its own per page reads them together.
 * Event ids are `<reply id>_<record id>`: a page that reconnects resumes after
 * `Last-Event-ID`; a fresh page first gets the recent history. Each stream
 * holds a Redis connection of this process: `maxClients` bounds them, and
 * `maxPerClient` keeps one client address from taking them all.
 */
import type { Logger } from 'pino';
import { parseEntry, type RedisClient, storage } from 'steerbot/plugin';
import { WEB_CHANNEL_ID } from './outbound.js';
import { recordView } from './record-view.js';

/** How long one XREAD blocks before a keep-alive comment is sent, in ms. */
const BLOCK_MS = 15_000;
const STREAM_ID = '\\d{1,20}-\\d{1,20}';
const LAST_EVENT_ID_RE = new RegExp(`^(${STREAM_ID})_(${STREAM_ID})$`);

/** Options of the event streams. */
export interface WebEventsOptions {
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** Entries of each stream a fresh page is shown. */
  historyEntries: number;
  /** Most open streams. */
  maxClients: number;
  /** Most open streams of one client (a `ClientAddresses` key). */
  maxPerClient: number;
}

/** A place for one more stream, or why there is none: every place is taken (`full`), or the client holds its share (`client`). */
export type StreamHold = { ok: true; place: HeldStream } | { ok: false; reason: 'full' | 'client' };

/** A place held for one client's stream: counted against the client until the stream ends, its request aborts or `release()`. */
export interface HeldStream {
  /** Gives the place back (the request failed before its stream began). Idempotent. */
  release(): void;
  /** The readers' place, which `stream` hands to `BlockingReaders.sse`. */
  readonly readers: storage.ReaderPlace;
  /** Uncounts the client's stream (its end). Idempotent. */
  readonly done: () => void;
}

/** Open event streams, so they can be ended on shutdown. */
export class WebEventStreams {
  private readonly readers = new storage.BlockingReaders();
  /** Open (or about to open) streams by client; a client with none has no entry. */
  private readonly perClient = new Map<string, number>();

  constructor(private readonly o: WebEventsOptions) {}

  /**
   * A place for one more stream of `client`, unless it holds `maxPerClient`
   * or `maxClients` are open (see `BlockingReaders.hold`). Counted in one
   * step, so requests arriving together cannot all pass.
   */
  hold(client: string, signal: AbortSignal): StreamHold {
    if ((this.perClient.get(client) ?? 0) >= this.o.maxPerClient) return { ok: false, reason: 'client' };
    const readers = this.readers.hold(this.o.maxClients, signal);
    if (!readers) return { ok: false, reason: 'full' };
    this.perClient.set(client, (this.perClient.get(client) ?? 0) + 1);
    let counted = true;
    const done = () => {
      if (!counted) return;
      counted = false;
      signal.removeEventListener('abort', done);
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left > 0) this.perClient.set(client, left);
      else this.perClient.delete(client);
    };
    signal.addEventListener('abort', done, { once: true });
    const release = () => {
      readers.release();
      done();
    };
    return { ok: true, place: { readers, done, release } };
  }

  /** Ends every open stream (shutdown). */
  closeAll(): void {
    this.readers.closeAll();
  }

  /**
   * Where a stream starts: after `lastEventId` (validated by `parseLastEventId`),
   * else just before the last `historyEntries` entries of each stream.
   * @throws RedisUnavailableError when Redis cannot be reached.
   */
  async cursors(conversationId: string, lastEventId: string | undefined): Promise<[string, string]> {
    const parsed = lastEventId === undefined ? undefined : parseLastEventId(lastEventId);
    if (parsed) return parsed;
    const k = storage.pluginStorage(this.o.prefix, WEB_CHANNEL_ID).core(conversationId);
    const keys = [k.replies, k.log];
    const n = this.o.historyEntries;
    const [a, b] = await storage.redisCall(() => Promise.all(keys.map((k) => this.o.redis.xrevrange(k, '+', '-', 'COUNT', n + 1))));
    // The entry before the last n: XREAD returns what comes after it. Fewer than n + 1: from the start.
    const before = (r: Array<[string, string[]]>) => (r.length === n + 1 ? r[n]![0] : '0-0');
    return [before(a!), before(b!)];
  }

  /** The SSE body in the place `hold` gave: events after `from`, until `signal` aborts or the stream is closed. */
  async *stream(place: HeldStream, conversationId: string, from: [string, string], signal: AbortSignal): AsyncGenerator<string> {
    try {
      yield* this.read(place.readers, conversationId, from, signal);
    } finally {
      place.done();
    }
  }

  /** The stream's events, in the readers' place. */
  private read(place: storage.ReaderPlace, conversationId: string, from: [string, string], signal: AbortSignal): AsyncGenerator<string> {
    const { replies, log } = storage.pluginStorage(this.o.prefix, WEB_CHANNEL_ID).core(conversationId);
    let [replyCursor, logCursor] = from;
    const view = (id: string, fields: string[]) => this.view(id, fields);
    return this.readers.sse(
      place,
      this.o.redis,
      signal,
      (conn) => conn.xread('COUNT', 200, 'BLOCK', BLOCK_MS, 'STREAMS', replies, log, replyCursor, logCursor) as Promise<storage.XreadReply>,
      function* (r) {
        const out: Array<{ at: number; event: string; data: string; replyId?: string; logId?: string }> = [];
        for (const [key, rows] of r) {
          for (const [id, fields] of rows) {
            if (key === replies) {
              out.push({ at: Number(id.slice(0, id.indexOf('-'))), event: 'reply', data: fields[fields.indexOf('data') + 1] ?? '{}', replyId: id });
            } else {
              const v = view(id, fields);
              // A newer release's entry is not shown, but the cursor moves past it.
              if (v) out.push({ at: v.at, event: 'record', data: JSON.stringify(v), logId: id });
              else logCursor = id;
            }
          }
        }
        // The two streams interleave by time (the record's ids are seqs, the replies' are times).
        out.sort((a, b) => a.at - b.at);
        for (const e of out) {
          if (e.replyId) replyCursor = e.replyId;
          if (e.logId) logCursor = e.logId;
          yield `id: ${replyCursor}_${logCursor}\nevent: ${e.event}\ndata: ${e.data}\n\n`;
        }
      },
      (err) => this.o.logger.warn({ err }, 'web chat event stream read failed; closing it (the page reconnects and resumes)'),
    );
  }

  /** The page's view of one record entry; a broken entry is shown as such, a newer release's is skipped (undefined). */
  private view(id: string, fields: string[]) {
    const seq = Number(id.slice(0, id.indexOf('-')));
    try {
      const entry = parseEntry(seq, fields[fields.indexOf('e') + 1] ?? '');
      return entry && recordView(entry);
    } catch (err) {
      this.o.logger.warn({ err, seq }, 'record entry unreadable by this build');
      return { seq, kind: 'unreadable', at: Date.now() };
    }
  }
}

/** The two stream cursors of a `Last-Event-ID`, or undefined when it is not one of ours. */
export function parseLastEventId(id: string): [string, string] | undefined {
  const m = LAST_EVENT_ID_RE.exec(id);
  return m ? [m[1]!, m[2]!] : undefined;
}
