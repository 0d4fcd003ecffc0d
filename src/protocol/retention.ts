/**
 * Retention: how long what a conversation leaves behind is kept. Ended runs'
 * hashes expire (set by finish); the record can be trimmed behind the
 * compaction checkpoint and idle conversations can expire (`retain-1.lua`,
 * run after a run ends, only when configured: both lose history a user may
 * expect, so both are off by default).
 */
import { DEFAULTS } from '../config/defaults.js';
import { CONVERSATION_KEY_SUFFIXES, conversationKeys } from '../redis/keys.js';
import { type RedisClient, runScript } from '../scripts/index.js';

/** What an update for a purged conversation gets while its tombstone stands. */
export type AfterPurge = 'refuse' | 'restart';

/** Conversation state key of the compaction checkpoint (the runner writes it; trimming reads its `covers_until`). */
export const CHECKPOINT_STATE_KEY = 'runner.compaction.checkpoint';

/** Default time an ended run's hash is kept, in seconds (3 days). */
export const DEFAULT_ENDED_RUN_TTL_SECONDS: number = DEFAULTS.retention.endedRunTtlSeconds;

/** Default life of a purged conversation's tombstone, in seconds (7 days). Never shorter than the dedupe TTL. */
export const DEFAULT_TOMBSTONE_TTL_SECONDS: number = DEFAULTS.retention.tombstoneTtlSeconds;

/** Default count bound of a conversation's run index and outbox (ended runs, acknowledged delivery records). */
export const DEFAULT_INDEX_MAX_ENTRIES: number = DEFAULTS.retention.indexMaxEntries;

/** Retention settings of the protocol. */
export interface RetentionOptions {
  /** How long an ended run's hash is kept, in seconds; 0 keeps it forever. Default 259 200 (3 days). */
  endedRunTtlSeconds?: number;
  /**
   * Record entries before the compaction checkpoint are trimmed once this many
   * newer entries exist; 0 turns it off. Default 0. Entries from the
   * checkpoint on, and every message a live run or a waiting message needs, stay.
   */
  recordTrimAfterEntries?: number;
  /** Record entries before the compaction checkpoint are trimmed once older than this, in ms; 0 turns it off. Default 0. */
  recordTrimAfterMs?: number;
  /** An idle conversation (no active run, nothing pending) expires this long after its last run ended, in seconds; 0 keeps it. Default 0. */
  idleTtlSeconds?: number;
  /** How long a purged conversation's tombstone stands, in seconds (raised to the dedupe TTL when shorter). Default 604 800 (7 days). */
  tombstoneTtlSeconds?: number;
  /**
   * Per conversation, ended runs beyond the newest this many leave the run
   * index and their hashes are deleted (at a run's end), and acknowledged
   * delivery records beyond the newest this many leave the outbox (at a
   * claim; `RunDelivery`'s `outboxMaxEntries`). The active run and records not
   * acknowledged always stay. 0 turns it off. Default 100.
   */
  indexMaxEntries?: number;
}

/** Retention with defaults applied. */
export type ResolvedRetention = Required<RetentionOptions>;

/** Applies the defaults; negative or non-integer values are a caller bug and are refused by the config schema, so they are clamped here. */
export function resolveRetention(r: RetentionOptions = {}): ResolvedRetention {
  const n = (v: number | undefined, d: number) => Math.max(0, Math.floor(v ?? d));
  return {
    endedRunTtlSeconds: n(r.endedRunTtlSeconds, DEFAULT_ENDED_RUN_TTL_SECONDS),
    recordTrimAfterEntries: n(r.recordTrimAfterEntries, 0),
    recordTrimAfterMs: n(r.recordTrimAfterMs, 0),
    idleTtlSeconds: n(r.idleTtlSeconds, 0),
    tombstoneTtlSeconds: Math.max(1, n(r.tombstoneTtlSeconds, DEFAULT_TOMBSTONE_TTL_SECONDS)),
    indexMaxEntries: n(r.indexMaxEntries, DEFAULT_INDEX_MAX_ENTRIES),
  };
}

/** The `retention` config section as protocol options (days become ms). */
export function retentionOptions(c: {
  endedRunTtlSeconds: number;
  recordTrimAfterEntries: number;
  recordTrimAfterDays: number;
  idleTtlSeconds: number;
  tombstoneTtlSeconds: number;
  indexMaxEntries: number;
}): RetentionOptions {
  return {
    endedRunTtlSeconds: c.endedRunTtlSeconds,
    recordTrimAfterEntries: c.recordTrimAfterEntries,
    recordTrimAfterMs: c.recordTrimAfterDays * 86_400_000,
    idleTtlSeconds: c.idleTtlSeconds,
    tombstoneTtlSeconds: c.tombstoneTtlSeconds,
    indexMaxEntries: c.indexMaxEntries,
  };
}

/** Whether `retain` has anything to do for these settings (it costs a round trip per run end). */
export function retentionActive(r: ResolvedRetention): boolean {
  return r.recordTrimAfterEntries > 0 || r.recordTrimAfterMs > 0 || r.idleTtlSeconds > 0;
}

/** What one `retain` call did. */
export interface RetainResult {
  /** Record entries removed. */
  trimmed: number;
  /** The conversation was idle and now expires after `idleTtlSeconds`. */
  expiring: boolean;
}

/**
 * Applies record trimming and idle expiry to one conversation, in one script;
 * `pluginKeys`: suffixes of the conversation keys plugins declare (`declaredConversationKeys`).
 * Safe to call at any time: it reads the live state (checkpoint, active run,
 * pending) in the same step.
 */
export async function retainConversation(
  client: RedisClient,
  prefix: string,
  conversationId: string,
  r: ResolvedRetention,
  pluginKeys: readonly string[] = [],
): Promise<RetainResult> {
  const k = conversationKeys(prefix, conversationId);
  const reply = await runScript(
    client,
    'retain',
    [k.base],
    [r.recordTrimAfterEntries, r.recordTrimAfterMs, r.idleTtlSeconds, conversationId, CHECKPOINT_STATE_KEY, ...CONVERSATION_KEY_SUFFIXES, ...pluginKeys],
  );
  return { trimmed: Number(reply[1]), expiring: reply[2] === 1 };
}
