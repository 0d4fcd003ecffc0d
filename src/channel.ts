/**
 * The channel plugin contract. A channel plugin has an inbound side that
 * turns platform updates into normalized messages and hands them to the
 * host, and an outbound side that delivery uses (send, edit, typing,
 * platform limits). Every channel plugin passes `channelPluginContract`
 * from `steerbot/testing` (testing/channel-contract.ts).
 */
import type { Logger } from 'pino';
import type {
  Attachment,
  FetchedFile,
  IncomingMessage,
  IngestResult,
  InputPolicy,
  PluginDefinition,
  pages,
  ReactionStatus,
  RedisClient,
  RouteRegistry,
} from 'steerbot/plugin';
import type { z } from 'zod';

export { splitMessage } from './split-message.js';

/** Options of one outbound send. */
export interface SendOptions {
  /** Platform message id to reply to. */
  replyTo?: string;
  /** `markdown`: try formatted text, fall back to plain when the platform refuses it. Default `plain`. */
  format?: 'markdown' | 'plain';
  /** Stable delivery key of this message (`<run id>:<answered seq>:<n>`), for platforms that take an idempotency key. */
  deliveryKey?: string;
  /**
   * Set when this send repeats one whose outcome was never recorded (its
   * runner died between the send and the outbox write): an earlier attempt
   * may already have sent this message, at or after this time (ms since the
   * epoch, Redis's clock). A channel that can find its own message by
   * `deliveryKey` looks for it from then on and, when it is there, returns
   * its id instead of sending it again (making it show `text`); a channel
   * that cannot sends it, and the platform may show it twice. Absent on a
   * first send.
   */
  maybeSentSince?: number;
  /**
   * Buttons under the message (a tool approval's Approve / Deny). A click
   * reaches the host as an inbound message whose text is the button's
   * `command`, from the user who clicked, with `interaction: 'button'`.
   * Channels without buttons ignore them: the text says what to send instead.
   */
  buttons?: MessageButton[];
}

/** A button under a message. */
export interface MessageButton {
  /** What the button shows. */
  label: string;
  /** The control command a click sends (e.g. `/approve ap_…`; at most 64 bytes). */
  command: string;
}

/** A file to send natively in a chat (`ChannelOutbound.sendFile`). */
export interface OutboundFile {
  /** File name shown to the user (no folders), e.g. `report.pdf`. */
  name: string;
  /** Media type, e.g. `image/png`, `application/pdf`. Images (`image/*`) are shown as images where the platform can. */
  mimeType: string;
  /** The content; at most the channel's `maxFileBytes`. */
  bytes: Uint8Array;
  /** Text shown with the file, plain (at most 1000 characters). */
  caption?: string;
  /** A spoken reply (audio in the channel's `voiceFormat`): a voice message where the platform has one (Telegram, WhatsApp), an audio file elsewhere. */
  voice?: boolean;
}

/** The audio formats a spoken reply can be made in (`ChannelOutbound.voiceFormat`). */
export type VoiceFormat = 'opus' | 'aac';

/** Options of one file send. */
export interface SendFileOptions {
  /** Stable delivery key of this file (`<run id>:<tool call key>:0`), for platforms that take an idempotency key. */
  deliveryKey?: string;
  /** Platform message id to reply to. */
  replyTo?: string;
  /** As `SendOptions.maybeSentSince`: an earlier attempt may already have sent this file, at or after this time (ms since the epoch). */
  maybeSentSince?: number;
}

/** Options of one outbound edit. */
export interface EditOptions {
  /** `markdown`: try formatted text, fall back to plain when the platform refuses it. Default `plain`. */
  format?: 'markdown' | 'plain';
}

/** The outbound side of a channel: what delivery uses. Errors are ChannelApiError (with `retryAfterMs` on 429). */
export interface ChannelOutbound {
  /** Channel id, e.g. `telegram`, `discord`, `webhook:crm`. */
  channelId: string;
  /** Longest message the platform accepts, in characters (Telegram 4096, Discord 2000). Delivery splits longer replies. */
  maxMessageChars: number;
  /** Sends one message (at most `maxMessageChars`); returns the platform's message id. */
  send(conversationId: string, text: string, opts?: SendOptions): Promise<{ messageId: string }>;
  /**
   * Sends one file natively (an image as an image where the platform shows
   * one, anything else as a document), at most `maxFileBytes`; returns the
   * platform's message id. Absent: the channel takes no files, and delivery
   * sends a text message saying the file could not be sent instead.
   */
  sendFile?(conversationId: string, file: OutboundFile, opts?: SendFileOptions): Promise<{ messageId: string }>;
  /** Largest file `sendFile` takes, in bytes (Telegram 50 MB, Discord 25 MB). Delivery sends a text message instead of a larger file. Required with `sendFile`. */
  maxFileBytes?: number;
  /**
   * The audio a spoken reply is made in: `opus` (OGG/Opus, `reply.ogg`) or
   * `aac` (ADTS frames, `reply.aac`, `audio/aac`), for a platform that plays
   * no Opus (LINE, which puts them in an M4A container). Default `opus`.
   */
  voiceFormat?: VoiceFormat;
  /**
   * Replaces the text of a message sent earlier (streaming). `opts.format` as in
   * `send`, so a streamed reply ends formatted like one sent whole. Absent when
   * the platform cannot edit.
   */
  edit?(conversationId: string, messageId: string, text: string, opts?: EditOptions): Promise<void>;
  /** Shows a typing indicator once; delivery refreshes it while a run is active. */
  typing?(conversationId: string): Promise<void>;
  /**
   * How long a run works before delivery first calls `typing`, in ms: an
   * answer sooner shows none (and costs no platform call). Default 500. A
   * channel whose typing call does more than show typing (WhatsApp marks the
   * message read with it) sets 0.
   */
  typingDelayMs?: number;
  /**
   * Whether `userId` administers the chat of `conversationId` on the platform
   * (Telegram: creator or administrator; Discord: Administrator, Manage Guild
   * or Manage Messages). The host asks it only for control commands sent in
   * group chats, and caches answers briefly. Throws ChannelApiError when the
   * platform cannot tell. Absent: only the channel's configured `admins` count.
   */
  isAdmin?(conversationId: string, userId: string): Promise<boolean>;
  /**
   * Least time between two streaming edits of one message in this
   * conversation, in ms (Telegram: 1000 in private chats, 3000 in groups).
   * Absent: the channel does not stream.
   */
  streamEditIntervalMs?(conversationId: string): number;
  /**
   * Fetches the bytes of one of this channel's attachments (by its `ref`),
   * when a runner builds a prompt: the record keeps references only. A URL
   * that came in a message is fetched with `guardedFetch` only. Throws
   * InvalidInputError when the file is larger than `maxBytes` or its URL is
   * refused (FetchRefusedError), ChannelApiError when the platform refuses.
   * Absent: attachments reach the model as text placeholders.
   */
  fetchAttachment?(attachment: Attachment, opts: { maxBytes: number; signal?: AbortSignal }): Promise<FetchedFile>;
  /**
   * Whether the bot may start `conversationId` itself, before anyone wrote in
   * it (Telegram: any chat id; the platform still refuses a user who never
   * started the bot). The messages and events APIs refuse a conversation with
   * no record unless this says yes. Absent: never.
   */
  opensConversation?(conversationId: string): boolean;
  /**
   * Shows a run's progress on the person's message as a reaction (opt-in per
   * channel, its `reactions` setting): `taken` when a run takes the message,
   * `answered` once its answer was sent, `failed` when the run ended without
   * one. Each replaces the bot's previous reaction on that message, and
   * setting the same one again changes nothing (a takeover may repeat it).
   * Absent: the channel shows none.
   */
  react?(conversationId: string, messageId: string, status: ReactionStatus): Promise<void>;
}

/** What the host does with one normalized inbound message. */
export type ReceiveResult =
  | { kind: 'ingested'; result: IngestResult }
  /** `edit`: for a button click, the text the message with the buttons should now show (buttons removed); absent when it stays as it is. */
  | { kind: 'command'; command: string; reply: string; duplicate: boolean; edit?: string }
  /** `refused`: the channel's access policy refused the sender (answered at most once per notice window, nothing recorded). */
  | { kind: 'ignored'; reason: 'not-allowed' | 'not-addressed' | 'empty' | 'refused' };

/** A normalized inbound message plus what the host needs to decide on it. */
export interface InboundMessage extends IncomingMessage {
  /** The platform chat id (for allow-lists). */
  chatId: string;
  /**
   * Sent in a group chat (several people share the conversation): control
   * commands that affect everyone are then for admins only. Default false (1:1).
   */
  group?: boolean;
  /**
   * `button`: a click on a message's button (its command is the text); the
   * host does not answer it with a chat message: the channel shows the
   * command's reply (a toast) and the result's `edit`. Default: a message.
   */
  interaction?: 'button';
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
  /** The host's HTTP routes, to register webhook routes on (before it listens). */
  routes: RouteRegistry;
  /** Redis, for channel-level leases (e.g. one long-polling host). */
  redis: RedisClient;
  /** Key prefix. */
  prefix: string;
  logger: Logger;
  /**
   * How long an update's dedupe key lives, in seconds (`dispatch.dedupeTtlSeconds`):
   * a redelivery or replay after it is no longer recognised, so channels whose
   * signature carries no time refuse deliveries older than `replayWindowSeconds(dedupeTtlSeconds)`.
   * Default (hosts that do not set it): 86 400.
   */
  dedupeTtlSeconds?: number;
}

/**
 * What a channel plugin factory gets besides its own config:
 * `create<Name>Plugin(config, deps)`. Runners create plugins only for their
 * outbound side and never call `start()`, so `outbound` must work unstarted.
 */
export interface ChannelDeps {
  logger: Logger;
  /** The shared command connection (not for blocking reads: `duplicate()` it). */
  redis: RedisClient;
  /** Key prefix (config `redis.prefix`). */
  prefix: string;
  /** `fetch` for platform HTTP calls (tests, proxies). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * The operator's login (the console's secret and cookie): a page private to
   * the operator accepts it (`checkAccess`, `servePage`). Undefined where no
   * host serves pages (a runner's outbound-only instances); a private page
   * then lets nobody in without a token of its own.
   */
  operatorAccess?: pages.PageAccess;
}

/** What the host applies to a channel's inbound messages. */
export interface ChannelSettings {
  /**
   * Input policy of the channel's conversations. The composition leaves it
   * unset: a conversation's input policy comes from its profile (`bindings`
   * → `profiles.<name>.inputPolicy`). Default: the dispatch default.
   */
  policy?: InputPolicy;
  /**
   * Operator-made admins: sender ids that may approve pairing codes and link
   * (`/pair`, `/link`), always talk, and use `/stop`, `/new`, `/queue`,
   * `/compact` and `/purge` in group chats besides the platform's chat
   * admins. The composition fills it from `access.channels.<id>.admins`.
   * Who else may talk is the access gate's (`access.channels.<id>`).
   */
  admins?: readonly string[];
  /**
   * The channel's sender ids are chosen by its client, not proven by a
   * platform (a public web chat): listed users and admins never match them,
   * and `/pair` and `/link` are refused there. Default false.
   */
  unverifiedSenders?: boolean;
}

/** A channel instance, created by its plugin definition's factory. */
export interface ChannelPlugin {
  /** Channel id (the conversation id prefix). */
  id: string;
  /** Settings the host applies to this channel (the composition adds `admins` from `access`). Default: none. */
  settings?: ChannelSettings;
  /** Outbound side; used by runners (and by the host for command replies). */
  outbound: ChannelOutbound;
  /** Host side: starts receiving (registers routes, starts polling or the gateway). */
  start(host: ChannelHost): Promise<void>;
  /** Stops receiving and closes platform connections. Must not throw. */
  stop(): Promise<void>;
  /**
   * Whether the inbound side can receive now (a gateway session up, polling
   * working, a webhook registered), for `/readyz`. Called on every probe: must
   * be cheap and must not throw. Default: ready once started.
   */
  ready?(): { ready: boolean; detail?: string };
  /**
   * What an operator should look at in one of this channel's conversations
   * (e.g. `callbacks behind`), listed by the console as why it is stuck and by `/status`.
   * Called for every conversation the console lists: keep it to one round
   * trip of reads. Returns [] when all is well. Default: nothing to report.
   */
  conversationProblems?(conversationId: string): Promise<string[]>;
  /**
   * After one of this channel's conversations was purged, on every path
   * (`/purge` in the chat, the console, `RunningApp.purge`), and again when a
   * purge finds it purged before: deletes what the plugin keeps for it
   * outside the conversation's own keys (which the purge already deleted),
   * e.g. an entry in another conversation's key. Must be safe to repeat. A
   * throw fails the purge's caller after the purge itself took effect.
   * Default: nothing to delete.
   */
  purged?(conversationId: string): Promise<void>;
}

/** A channel plugin module's definition: `create` builds one instance, or several (one per named webhook). */
export type ChannelPluginDefinition<S extends z.ZodType = z.ZodType> = PluginDefinition<'channel', S, ChannelDeps, ChannelPlugin | ChannelPlugin[]>;

/** Types a channel plugin definition (identity at run time). */
export function defineChannelPlugin<S extends z.ZodType>(definition: ChannelPluginDefinition<S>): ChannelPluginDefinition<S> {
  return definition;
}

/**
 * Where a conversation id continues into a thread of its own: `:` (a Telegram
 * topic, a Slack or Feishu thread), `/` (a Matrix thread, `<room>/<root>`), `;`
 * (a Teams channel thread, `;messageid=`). A member names a Matrix thread's
 * root, so a chat's binding or persona must cover every thread of it.
 */
const THREAD_SEPARATORS = new Set([':', '/', ';']);

/**
 * Finds a conversation's channel (or chat) among `channelIds`: the longest id
 * that is the conversation id itself or prefixes it followed by a thread
 * separator (`:`, `/` or `;`; channel ids may contain `:`, e.g. a named
 * instance `<plugin>:<name>`). Undefined when none does.
 */
export function channelResolver(channelIds: Iterable<string>): (conversationId: string) => string | undefined {
  // Longest first, so `a:b` wins over `a` for `a:b:42`.
  const ids = [...new Set(channelIds)].sort((x, y) => y.length - x.length);
  return (conversationId) =>
    ids.find((id) => conversationId === id || (conversationId.startsWith(id) && THREAD_SEPARATORS.has(conversationId[id.length] ?? '')));
}

/** Finds a conversation's outbound side among `plugins` (by its channel id, see `channelResolver`). */
export function outboundResolver(plugins: readonly ChannelPlugin[]): (conversationId: string) => ChannelOutbound | undefined {
  const byId = new Map(plugins.map((p) => [p.id, p.outbound]));
  const channelOf = channelResolver(byId.keys());
  return (conversationId) => {
    const id = channelOf(conversationId);
    return id === undefined ? undefined : byId.get(id);
  };
}
