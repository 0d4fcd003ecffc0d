/**
 * The plugin kit (`steerbot/plugin`): what both kinds of plugin import, each
 * name exported here once. `steerbot/channel` and `steerbot/runner` hold the
 * two contracts; this entry holds the tools to write them with. A built-in
 * plugin imports these from the package, as a third party would
 * (docs/plugins.md, "The public API"). Three tiers:
 *
 * - common: zod, config helpers, errors, the logger, the record's types, the
 *   Redis connection's type, the HTTP client and the guarded fetch: what
 *   most plugins need;
 * - advanced: routes, signatures (`signatures`) and replay windows, browser
 *   pages (`pages`), identities, signed files, metrics: for plugins that
 *   serve HTTP;
 * - storage internals (`storage`): a plugin's own keys and Lua scripts,
 *   leases, reply streams, blocking readers: for plugins that keep state of
 *   their own in Redis.
 *
 * A group of helpers used together is one namespace, so the surface stays a
 * list a plugin author can read.
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
// JSON from outside the process (an agent's events, a platform's payload): parsed within the one nesting limit.
export { MAX_JSON_DEPTH, type ParsedJson, parseJson } from '../json.js';
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
export type { RedisClient } from '../redis/connection.js';
export type { PluginDefinition, PluginEnvBinding } from './definition.js';
/** The inline Markdown rules (code, links, bold, italic, strike) a platform's HTML dialect renders, headings and code fences: `inlineMarkdownHtml`, `HtmlDialect`, `markdownHeading`, `markdownFence`, `fenceLanguage`, `closesFence`. */
export * as html from './markdown-inline.js';
export { oggDurationMs } from './ogg.js';

// ── advanced: serving HTTP, identities ──────────────────────────────────────

export { sameToken } from '../http/access.js';
// A client's address as one form: IPv4-mapped IPv6, dotted or hex, as IPv4; an entry of a list of addresses and
// ranges checked (per-client limits, allow-lists).
export { isAddressOrRange, unmapIpv4 } from '../http/address-policy.js';
// The age limit of deliveries whose signature carries no time (WhatsApp, the Telegram webhook).
export { replayWindowSeconds, type StaleReason, staleDelivery } from '../http/replay-window.js';
export { retryAfterMs } from '../http/retry-after.js';
export type { HttpRoute, RouteHeaders, RouteRegistry, RouteRequest, RouteResponse } from '../http/routes.js';
export { eventStream, json, readJsonBody } from '../http/routes.js';
export { type IdentityHooks, IdentityStore, type IdentityStoreOptions, type LinkResult } from '../people/identity.js';
export { type PluginMetrics, pluginMetrics } from '../telemetry/plugin-metrics.js';
export { type SignedFileStore, type SignedFileStoreOptions, signedFileStore } from './files.js';
/** Browser pages a channel serves: who may open them, the host's headers, same-origin writes. */
export * as pages from './kit-pages.js';
/** steerbot's HMAC signature of webhook bodies: sign, signed headers, check. */
export * as signatures from './kit-signatures.js';

// ── storage internals: a plugin's own keys and scripts, leases, reply streams ─

/** A plugin's own Redis state: keys, scripts, leases, reply streams, blocking readers. */
export * as storage from './kit-storage.js';
