import { DEFAULTS } from '../config/defaults.js';
import type { RedisClient } from '../scripts/index.js';
import { type AfterPurge, type ResolvedRetention, type RetentionOptions, resolveRetention } from './retention.js';
import type { InputPolicy } from './types.js';

/** Options shared by the host and runner halves of the protocol. */
export interface ProtocolOptions {
  /** Redis client (single node, Sentinel or Cluster). */
  client: RedisClient;
  /** Key prefix. Default `sb`. */
  prefix?: string;
  /** How long a dedupe key is kept, in seconds. Default 86400 (Telegram keeps updates 24 h). */
  dedupeTtlSeconds?: number;
  /** Most messages a run's steering list holds before overflow goes to pending. Default 20. */
  steeringCap?: number;
  /** Policy when neither the conversation nor the caller names one. Default `steer`. */
  defaultPolicy?: InputPolicy;
  /** Whether the runner declares the `steering` capability; without it `steer` acts as `collect`. Default true. */
  steeringCapable?: boolean;
  /** Run lease length, in ms. Default 30000. */
  leaseMs?: number;
  /** Largest message text, in characters. Default 16000. */
  maxMessageChars?: number;
  /** Largest state value, in bytes of JSON. Default 262144. */
  maxStateBytes?: number;
  /** Clock for entry timestamps, ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** Token-bucket limits checked inside ingest (per sender within a conversation, and per conversation). Default: none. */
  rateLimit?: RateLimitOptions;
  /** How long ended runs, the record and idle conversations are kept (`RetentionOptions`). Default: ended runs 3 days, the rest kept. */
  retention?: RetentionOptions;
  /** What an update for a purged conversation gets while its tombstone stands: `refuse`, or `restart` (a new, empty conversation). Default `refuse`. */
  afterPurge?: AfterPurge;
  /** Suffixes of the conversation keys plugins declare (`declaredConversationKeys`): purged and expired with the conversation. Default: none. */
  pluginKeys?: readonly string[];
}

/** One token bucket: `capacity` messages at once, refilled at `refillPerMinute`. */
export interface TokenBucketOptions {
  /** Most messages accepted in a burst. */
  capacity: number;
  /** Tokens added per minute (fractions allowed). */
  refillPerMinute: number;
}

/** Rate limits of ingest; an absent bucket does not limit. */
export interface RateLimitOptions {
  /** Per sender, within one conversation. */
  user?: TokenBucketOptions | undefined;
  /** Per conversation, all senders together. */
  conversation?: TokenBucketOptions | undefined;
}

/** Options with defaults applied. */
export type ResolvedProtocolOptions = Required<Omit<ProtocolOptions, 'rateLimit' | 'retention'>> &
  Pick<ProtocolOptions, 'rateLimit'> & { retention: ResolvedRetention };

export function resolveOptions(o: ProtocolOptions): ResolvedProtocolOptions {
  return {
    client: o.client,
    prefix: o.prefix ?? DEFAULTS.redis.prefix,
    dedupeTtlSeconds: o.dedupeTtlSeconds ?? DEFAULTS.dispatch.dedupeTtlSeconds,
    steeringCap: o.steeringCap ?? DEFAULTS.dispatch.steeringCap,
    defaultPolicy: o.defaultPolicy ?? DEFAULTS.dispatch.defaultPolicy,
    steeringCapable: o.steeringCapable ?? true,
    leaseMs: o.leaseMs ?? DEFAULTS.runs.leaseMs,
    maxMessageChars: o.maxMessageChars ?? DEFAULTS.dispatch.maxMessageChars,
    maxStateBytes: o.maxStateBytes ?? DEFAULTS.maxStateBytes,
    now: o.now ?? Date.now,
    ...(o.rateLimit !== undefined && { rateLimit: o.rateLimit }),
    retention: resolveRetention(o.retention),
    afterPurge: o.afterPurge ?? DEFAULTS.dispatch.afterPurge,
    pluginKeys: o.pluginKeys ?? [],
  };
}
