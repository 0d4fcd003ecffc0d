/**
 * Purging a conversation ("delete my data"): its record, runs, inputs,
 * steering, pending, state (the compaction checkpoint included), outbox and
 * the keys plugins declare go in one atomic script (`purge-1.lua`; every key of a
 * conversation is in its `{c:<id>}` slot). A tombstone stays for
 * `tombstoneTtlSeconds`: updates for the conversation are refused meanwhile,
 * or start a new, empty conversation (`afterPurge: 'restart'`). Late writes
 * of a purged run are refused: its run hash is gone, and every run write is
 * fenced by it. This is the script alone: the host purges through
 * `hostPurge` (host/purge.ts), which runs every feature's purge hook around it.
 */

import type { RedisClient } from 'steerbot/plugin';
import { DEFAULTS } from '../config/defaults.js';
import { InvalidInputError, ScriptError } from '../errors.js';
import { assertUpdateKey, CONVERSATION_KEY_SUFFIXES, controlChannel, conversationKeys, PURGE_ONLY_KEY_SUFFIXES } from '../redis/keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';
import { type AfterPurge, DEFAULT_TOMBSTONE_TTL_SECONDS } from './retention.js';

/** Options of `purgeConversation`. */
export interface PurgeOptions {
  /** Stop an active run (it is told on the control channel, and its writes are refused) and purge. Default false: answer `active`. */
  stopActive?: boolean;
  /** What a later update for the conversation gets while the tombstone stands. Default `refuse`. */
  afterPurge?: AfterPurge;
  /** How long the tombstone stands, in seconds; raised to `dedupeTtlSeconds` when shorter. Default 604 800 (7 days). */
  tombstoneTtlSeconds?: number;
  /** The dispatch's dedupe TTL, in seconds: a redelivered pre-purge update must still meet its dedupe key. Default 86 400. */
  dedupeTtlSeconds?: number;
  /** Update key of the `/purge` command that asked: a redelivery of that update answers `duplicate` and does nothing. */
  updateKey?: string;
  /** Suffixes of the conversation keys plugins declare (`declaredConversationKeys`), deleted with the core's. Default: none. */
  pluginKeys?: readonly string[];
}

/** What a purge did. */
export type PurgeResult =
  /** Everything was deleted; `stoppedRunId`: the active run that was told to stop. `lastSeq`: the purged record's last seq (a restarted conversation continues after it). */
  | { kind: 'purged'; keysDeleted: number; stoppedRunId?: string; lastSeq: number }
  /** Nothing is stored and a tombstone stands: purged before. */
  | { kind: 'already_purged' }
  /** A run is active and `stopActive` was not set: nothing was written. */
  | { kind: 'active'; runId: string }
  /** Nothing was ever stored for the conversation (or it expired). */
  | { kind: 'not_found' }
  /** The command's update (`updateKey`) was seen before: nothing was done. */
  | { kind: 'duplicate' };

/**
 * Purges one conversation in one atomic step. Throws InvalidInputError for a
 * bad conversation id or option, writing nothing.
 */
export async function purgeConversation(client: RedisClient, prefix: string, conversationId: string, opts: PurgeOptions = {}): Promise<PurgeResult> {
  const k = conversationKeys(prefix, conversationId);
  const mode = opts.afterPurge ?? DEFAULTS.dispatch.afterPurge;
  if (mode !== 'refuse' && mode !== 'restart') throw new InvalidInputError(`afterPurge must be refuse or restart, not ${String(mode)}`);
  const ttl = Math.max(opts.tombstoneTtlSeconds ?? DEFAULT_TOMBSTONE_TTL_SECONDS, opts.dedupeTtlSeconds ?? DEFAULTS.dispatch.dedupeTtlSeconds);
  if (!Number.isInteger(ttl) || ttl < 1) throw new InvalidInputError('tombstoneTtlSeconds must be a positive integer');
  if (opts.updateKey !== undefined) assertUpdateKey(opts.updateKey);
  const r = checkReply(
    'purge',
    await runScript(
      client,
      'purge',
      [k.base],
      [
        opts.stopActive ? '1' : '0',
        mode,
        ttl,
        controlChannel(prefix),
        conversationId,
        opts.updateKey ?? '',
        opts.dedupeTtlSeconds ?? DEFAULTS.dispatch.dedupeTtlSeconds,
        ...CONVERSATION_KEY_SUFFIXES,
        ...PURGE_ONLY_KEY_SUFFIXES,
        ...(opts.pluginKeys ?? []),
      ],
    ),
  );
  switch (r[0]) {
    case 'purged':
      return { kind: 'purged', keysDeleted: Number(r[1]), ...(r[2] ? { stoppedRunId: String(r[2]) } : {}), lastSeq: Number(r[3]) };
    case 'active':
      return { kind: 'active', runId: String(r[1]) };
    case 'already_purged':
      return { kind: 'already_purged' };
    case 'not_found':
      return { kind: 'not_found' };
    case 'duplicate':
      return { kind: 'duplicate' };
    default:
      throw new ScriptError('purge', `unexpected reply ${JSON.stringify(r)}`);
  }
}
