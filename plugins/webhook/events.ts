/**
 * The webhook channel's event stream: `GET <path>/conversations/:conversation/events`
 * streams a conversation's replies as Server-Sent Events, read from the
 * conversation's reply stream in Redis (`XREAD BLOCK` on a connection of its
 * own per client). Resumes after `Last-Event-ID` (header, or `lastEventId`
 * query parameter); without one it starts with the next reply.
 *
 * Authentication: `Authorization: Bearer <stream token>`, where the stream
 * token of a conversation is `<hex HMAC-SHA256(secret, "events:<conversation>")>`
 * (minted by the receiver's backend: it opens that one conversation's stream
 * and signs nothing), or (for browsers' EventSource, which cannot set headers)
 * query parameters `ts=<unix seconds>` and `sig=sha256=<hex HMAC-SHA256(secret,
 * "<ts>.<conversation>")>`, valid within the channel's `maxSkewSeconds` of `ts`
 * when the stream is opened. The signing secret itself is never a bearer
 * credential: it would travel in every request, and whoever saw it could sign
 * messages as the channel's sender.
 */
import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { eventStream, json, type RedisClient, type RouteRequest, type RouteResponse, sameToken, storage } from 'steerbot/plugin';
import type { WebhookChannelConfig } from './config.js';
import { CONVERSATION_RE } from './inbound.js';
import { sign } from './signature.js';

/** The JSON body of a callback (and the `data` of an event-stream event). */
export interface WebhookReply {
  /** The conversation, as the sender named it in requests. */
  conversation: string;
  text: string;
  /** Stable id of this reply (the delivery key); the same on every retry of one reply. */
  messageId: string;
  /** The `id` of the request this reply answers, when known. */
  inReplyTo?: string;
  /**
   * Buttons to offer (a tool approval's Approve / Deny): a choice is sent back
   * as an ordinary signed message whose text is the action's `command`.
   */
  actions?: Array<{ label: string; command: string }>;
  /** A file the agent sent (channels with `filesUrl`): `text` is then its caption (may be empty). */
  file?: WebhookFile;
}

/** A file in a reply: download it from `url` before `expiresAt`. */
export interface WebhookFile {
  name: string;
  mimeType: string;
  /** In bytes. */
  size: number;
  /** Signed download URL (GET), valid until `expiresAt`. */
  url: string;
  /** ISO 8601. */
  expiresAt: string;
  /** Present and true when the file is a spoken reply (audio of the answer, whose text came in a reply before it). */
  voice?: true;
}

/**
 * The bearer token of one conversation's event stream: hex HMAC-SHA256 of
 * `events:<conversation>` with the channel's secret. Its message cannot be a
 * signed request's (`<digits>.<body>`), so it signs nothing.
 */
export function streamToken(secret: string, conversation: string): string {
  return createHmac('sha256', secret).update(`events:${conversation}`).digest('hex');
}

/** How long one XREAD blocks before a keep-alive comment is sent, in ms. */
const BLOCK_MS = 15_000;
const STREAM_ID_RE = /^\d{1,20}-\d{1,20}$/;

export interface EventsOptions {
  channelId: string;
  config: WebhookChannelConfig;
  redis: () => RedisClient;
  prefix: string;
  logger: Logger;
  now: () => number;
}

/** Open event streams, so they can be ended on shutdown. */
export class EventStreams {
  private readonly readers = new storage.BlockingReaders();

  constructor(private readonly o: EventsOptions) {}

  get size(): number {
    return this.readers.size;
  }

  /** Ends every open stream (shutdown). */
  closeAll(): void {
    this.readers.closeAll();
  }

  /** Why the request may not open the stream, or undefined. */
  private refuse(req: RouteRequest, conversation: string): string | undefined {
    const auth = req.headers.authorization;
    if (typeof auth === 'string' && auth.startsWith('Bearer ')) {
      return sameToken(auth.slice('Bearer '.length), streamToken(this.o.config.secret, conversation)) ? undefined : 'bad stream token';
    }
    const q = req.query;
    if (typeof q.ts !== 'string' || typeof q.sig !== 'string') return 'missing Authorization: Bearer <stream token> or signed ts & sig query';
    if (!/^\d{1,12}$/.test(q.ts)) return 'ts must be unix seconds';
    if (!sameToken(sign(this.o.config.secret, q.ts, conversation), q.sig.toLowerCase())) return 'bad signature';
    if (Math.abs(Math.floor(this.o.now() / 1000) - Number(q.ts)) > this.o.config.maxSkewSeconds) return 'stale timestamp';
    return undefined;
  }

  /** The GET handler. */
  handler() {
    return async (req: RouteRequest): Promise<RouteResponse> => {
      const conversation = req.params.conversation ?? '';
      if (!CONVERSATION_RE.test(conversation)) return json(400, { error: 'bad conversation id' });
      const refused = this.refuse(req, conversation);
      if (refused) return json(401, { error: refused });
      const lastHeader = req.headers['last-event-id'] ?? req.query.lastEventId;
      if (lastHeader !== undefined && (typeof lastHeader !== 'string' || !STREAM_ID_RE.test(lastHeader))) {
        return json(400, { error: 'Last-Event-ID must be an event id from this stream' });
      }
      const place = this.readers.hold(this.o.config.maxStreamClients, req.signal);
      if (!place) return json(503, { error: 'too many event stream clients' });

      const key = storage.replyStreamKey(this.o.prefix, `${this.o.channelId}:${conversation}`);
      // Resolve "from now" to a concrete id first, so no reply falls between two reads.
      let from = lastHeader as string | undefined;
      if (from === undefined) {
        try {
          const last = await this.o.redis().xrevrange(key, '+', '-', 'COUNT', 1);
          from = last[0]?.[0] ?? '0-0';
        } catch (err) {
          place.release();
          throw storage.asRedisUnavailable(err);
        }
      }
      return eventStream(this.pump(place, key, from, req.signal));
    };
  }

  private pump(place: storage.ReaderPlace, key: string, from: string, signal: AbortSignal): AsyncGenerator<string> {
    let cursor = from;
    return this.readers.sse(
      place,
      this.o.redis(),
      signal,
      (conn) => conn.xread('COUNT', 100, 'BLOCK', BLOCK_MS, 'STREAMS', key, cursor) as Promise<storage.XreadReply>,
      function* (r) {
        for (const [id, fields] of r[0]?.[1] ?? []) {
          const data = fields[fields.indexOf('data') + 1] ?? '{}';
          yield `id: ${id}\ndata: ${data}\n\n`;
          cursor = id;
        }
      },
      (err) => this.o.logger.warn({ err }, 'event stream read failed; closing the stream (the client resumes with Last-Event-ID)'),
    );
  }
}
