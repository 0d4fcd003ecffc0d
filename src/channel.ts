/**
 * The channel plugin contract. A channel plugin has an inbound side that
 * turns platform updates into normalized messages and hands them to the
 * host, and an outbound side that delivery uses (send, edit, typing,
 * platform limits). Every channel plugin passes the contract suite in
 * `test/channels/contract.ts`.
 */
import type { Logger } from 'pino';
import type { IncomingMessage, IngestResult } from './protocol/types.js';

/** Options of one outbound send. */
/**
 * How long a delivery key is remembered by default, in seconds (7 days): the
 * runner's outbox records (`runner.outboxTtlSeconds`) and a channel's own
 * dedupe of sends (the webhook channel's `replyDedupeSeconds`).
 */
export const DEFAULT_DELIVERY_KEY_TTL_SECONDS = 604_800;

export interface SendOptions {
  /** Platform message id to reply to. */
  replyTo?: string;
  /** `markdown`: try formatted text, fall back to plain when the platform refuses it. Default `plain`. */
  format?: 'markdown' | 'plain';
  /** Stable delivery key of this message (`<run id>:<answered seq>:<n>`), for platforms that take an idempotency key. */
  deliveryKey?: string;
}

/** The outbound side of a channel: what delivery uses. Errors are ChannelApiError (with `retryAfterMs` on 429). */
export interface ChannelOutbound {
  /** Channel id, e.g. `telegram`, `discord`, `webhook:crm`. */
  channelId: string;
  /** Longest message the platform accepts, in characters (Telegram 4096, Discord 2000). Delivery splits longer replies. */
  maxMessageChars: number;
  /** Sends one message (at most `maxMessageChars`); returns the platform's message id. */
  send(conversationId: string, text: string, opts?: SendOptions): Promise<{ messageId: string }>;
  /** Replaces the text of a message sent earlier (streaming). Absent when the platform cannot edit. */
  edit?(conversationId: string, messageId: string, text: string): Promise<void>;
  /** Shows a typing indicator once; delivery refreshes it while a run is active. */
  typing?(conversationId: string): Promise<void>;
  /**
   * Least time between two streaming edits of one message in this
   * conversation, in ms (Telegram: 1000 in private chats, 3000 in groups).
   * Absent: the channel does not stream.
   */
  streamEditIntervalMs?(conversationId: string): number;
}

/** What the host does with one normalized inbound message. */
export type ReceiveResult =
  | { kind: 'ingested'; result: IngestResult }
  | { kind: 'command'; command: string; reply: string; duplicate: boolean }
  | { kind: 'ignored'; reason: 'not-allowed' | 'not-addressed' | 'empty' };

/** A normalized inbound message plus what the host needs to decide on it. */
export interface InboundMessage extends IncomingMessage {
  /** The platform chat id (for allow-lists). */
  chatId: string;
}

/** The host services a channel's inbound side calls. */
export interface ChannelHost {
  /**
   * Handles one inbound message: allow-lists, control commands (`/stop`,
   * `/new`, `/compact`, `/queue <mode>`, `/status`, answered through the
   * channel's outbound side), else ingest with the channel's policy.
   * Throws InvalidInputError on bad input and RedisUnavailableError when
   * Redis cannot be reached (ingress answers 503 so the platform retries).
   */
  receive(channelId: string, message: InboundMessage): Promise<ReceiveResult>;
  /** The host's HTTP server, to register webhook routes on (before it listens). */
  http: import('../host/http.js').HttpServer;
  /** Redis, for channel-level leases (e.g. one long-polling host). */
  redis: import('./scripts/index.js').RedisClient;
  /** Key prefix. */
  prefix: string;
  logger: Logger;
}

/**
 * What a channel plugin factory gets besides its own config:
 * `create<Name>Plugin(config, deps)`. Runners create plugins only for their
 * outbound side and never call `start()`, so `outbound` must work unstarted.
 */
export interface ChannelDeps {
  logger: Logger;
  /** The shared command connection (not for blocking reads: `duplicate()` it). */
  redis: import('./scripts/index.js').RedisClient;
  /** Key prefix (config `redis.prefix`). */
  prefix: string;
  /** `fetch` for platform HTTP calls (tests, proxies). Default: the global `fetch`. */
  fetch?: typeof fetch;
}

/** A channel plugin: `plugins/<name>/index.ts` exports `create<Name>Plugin(config)` returning this. */
export interface ChannelPlugin {
  /** Channel id (the conversation id prefix). */
  id: string;
  /** Outbound side; used by runners (and by the host for command replies). */
  outbound: ChannelOutbound;
  /** Host side: starts receiving (registers routes, starts polling or the gateway). */
  start(host: ChannelHost): Promise<void>;
  /** Stops receiving and closes platform connections. Must not throw. */
  stop(): Promise<void>;
}

