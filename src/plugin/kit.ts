/**
 * What both kinds of plugin import, re-exported by `steerbot/channel` and
 * `steerbot/runner` alike: config helpers, errors, signatures, the guarded
 * fetch, HTTP route helpers, Redis and the conversation record's types. A
 * built-in plugin imports these from the package, as a third party would
 * (docs/plugins.md, "The public API").
 */

/** The zod this package validates with: define a plugin's `configSchema` with it. */
export { z } from 'zod';
export { childController } from '../abort.js';
export { backoffMs } from '../backoff.js';
export { DEFAULT_DELIVERY_KEY_TTL_SECONDS } from '../config/defaults.js';
export { INPUT_POLICIES, type InputPolicy } from '../config/input-policies.js';
export type { EnvBinding, EnvKind } from '../config/load.js';
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
export { sameToken } from '../http/access.js';
export type { HttpClient, HttpClientOptions, HttpRequest, HttpRequestInit, HttpResponse } from '../http/client.js';
export { createHttpClient, HttpTimeoutError } from '../http/client.js';
export { type FetchedFile, type FetchFileOptions, fetchFile, fetchUrlFile } from '../http/fetch-file.js';
export { type GuardedFetchOptions, type GuardedResponse, guardedFetch, type ResolveHost } from '../http/guarded-fetch.js';
export type { HttpRoute, RouteHeaders, RouteRegistry, RouteRequest, RouteResponse } from '../http/routes.js';
export { eventStream, json, readJsonBody } from '../http/routes.js';
export { checkSignature, SIGNATURE_HEADER, sign, signedHeaders, TIMESTAMP_HEADER } from '../http/signature.js';
export type { Logger, PluginRedaction } from '../logger.js';
export {
  accountId,
  assertIdentityId,
  type IdentityHooks,
  IdentityStore,
  type IdentityStoreOptions,
  type LinkResult,
  MAX_IDENTITY_ID_LENGTH,
} from '../people/identity.js';
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
export { asRedisUnavailable, type RedisClient } from '../redis/connection.js';
export { type LeaseState, RedisLease } from '../redis/lease.js';
export { replyStreamKey, type StoreReplyOptions, type StoreReplyResult, storeReply } from '../reply-stream.js';
export type { ScriptReply } from '../scripts/index.js';
export { defineScript, type PluginScript } from '../scripts/plugin-script.js';
export { type PluginMetrics, pluginMetrics } from '../telemetry/plugin-metrics.js';
export type { PluginDefinition, PluginEnvBinding } from './definition.js';
export {
  assertPluginKeyName,
  type CoreConversationKeys,
  MAX_PLUGIN_KEY_NAME_LENGTH,
  PluginStorage,
  type PluginStorageDeclaration,
  pluginStorage,
} from './storage.js';
