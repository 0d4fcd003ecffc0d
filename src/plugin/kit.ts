/**
 * The plugin kit (`steerbot/plugin`): what both kinds of plugin import, each
 * name exported here once. `steerbot/channel` and `steerbot/runner` hold the
 * two contracts; this entry holds the tools to write them with. A built-in
 * plugin imports these from the package, as a third party would
 * (docs/plugins.md, "The public API"). Three tiers:
 *
 * - common: zod, config helpers, errors, the logger, the record's types, the
 *   HTTP client and the guarded fetch: what most plugins need;
 * - advanced: routes and pages, signatures and replay windows, event-stream
 *   readers, identities, the lease, reply streams, metrics: for plugins that
 *   serve HTTP or keep long connections;
 * - storage internals: Redis, a plugin's own keys and Lua scripts: for plugins
 *   that store state of their own.
 */

// ── common ──────────────────────────────────────────────────────────────────

/** The zod this package validates with: define a plugin's `configSchema` with it. */
export { z } from 'zod';
export { childController } from '../abort.js';
export { backoffMs } from '../backoff.js';
export { DEFAULT_DELIVERY_KEY_TTL_SECONDS } from '../config/defaults.js';
export { INPUT_POLICIES, type InputPolicy } from '../config/input-policies.js';
export type { EnvBinding, EnvKind } from '../config/load.js';
export { type ReactionStatus, type ReactionsSetting, reactionsSetting, staleReactions } from '../config/reactions.js';
export { allowEntry, enumOf, int, pageToken } from '../config/schema.js';
export { parseSection, refuseMovedSettings } from '../config/section.js';
export {
  ChannelApiError,
  ConfigError,
  type ConfigIssue,
  type FetchRefusal,
  FetchRefusedError,
  InvalidInputError,
  type MemoryLimit,
  MemoryLimitError,
  RedisUnavailableError,
  RunEndedError,
  redactSecrets,
  ScheduleForbiddenError,
  ScheduleLimitError,
  ScriptError,
  StaleRunError,
  SteerbotError,
  type SteerbotErrorCode,
} from '../errors.js';
export { silenceAllowed } from '../events.js';
export type { HttpClient, HttpClientOptions, HttpRequest, HttpRequestInit, HttpResponse } from '../http/client.js';
export { createHttpClient, HttpTimeoutError } from '../http/client.js';
export { type FetchedFile, type FetchFileOptions, fetchFile, fetchUrlFile } from '../http/fetch-file.js';
export { type GuardedFetchOptions, type GuardedResponse, guardedFetch, type ResolveHost } from '../http/guarded-fetch.js';
export type { Logger, PluginRedaction } from '../logger.js';
export type { IncomingMessage, IngestResult, PurgedResult, SteeringMode, StopKind } from '../protocol/types.js';
export {
  type Attachment,
  attachmentSchema,
  type InputOrigin,
  inputOriginSchema,
  type MessageReceived,
  messageReceivedSchema,
  type RecordEntry,
  recordEntrySchema,
  type Sender,
  type SeqEntry,
  senderSchema,
} from '../record/entries.js';
export { parseEntry } from '../record/read.js';
export type { PluginDefinition, PluginEnvBinding } from './definition.js';
export { oggDurationMs } from './ogg.js';

// ── advanced: serving HTTP, long connections, identities ───────────────────

// Pages and event streams (the web chat, the webhook's event stream).
export { type AccessVerdict, checkAccess, type PageAccess, type PageGuard, sameOriginJson, sameToken, servePage } from '../http/access.js';
export { assetRoute, pageHead } from '../http/page-shell.js';
// The age limit of deliveries whose signature carries no time (WhatsApp, the Telegram webhook).
export { replayWindowSeconds, type StaleReason, staleDelivery } from '../http/replay-window.js';
export { retryAfterMs } from '../http/retry-after.js';
export type { HttpRoute, RouteHeaders, RouteRegistry, RouteRequest, RouteResponse } from '../http/routes.js';
export { eventStream, json, readJsonBody } from '../http/routes.js';
export { checkSignature, SIGNATURE_HEADER, sign, signedHeaders, TIMESTAMP_HEADER } from '../http/signature.js';
export { BlockingReaders, blockingConnection, type ReaderPlace, type XreadReply } from '../http/stream-readers.js';
export { type IdentityHooks, IdentityStore, type IdentityStoreOptions, type LinkResult } from '../people/identity.js';
export { type LeaseState, RedisLease } from '../redis/lease.js';
export { LeasedPoll, type LeasedPollOptions } from '../redis/leased-poll.js';
export { replyStreamKey, type StoreReplyOptions, type StoreReplyResult, storeReply } from '../reply-stream.js';
export { type PluginMetrics, pluginMetrics } from '../telemetry/plugin-metrics.js';
export { type SignedFileStore, type SignedFileStoreOptions, signedFileStore } from './files.js';

// ── storage internals: Redis, a plugin's own keys and scripts ──────────────

export { asRedisUnavailable, type RedisClient } from '../redis/connection.js';
export type { ScriptReply } from '../scripts/index.js';
export { defineScript, type PluginScript } from '../scripts/plugin-script.js';
export { type CoreConversationKeys, PluginStorage, type PluginStorageDeclaration, pluginStorage } from './storage.js';
