/**
 * The one way the host purges a conversation: `/purge` in a chat, the
 * console's purge, `RunningApp.purge` from code and a parent's purge of its
 * subagent children all call the `Purge` made here, so every one of them
 * runs every feature's `purging` hook (subagents' children, schedules'
 * timers, budgets' notices, a channel's keys in another conversation's slot)
 * around the same atomic script (`purgeConversation`), with the host's
 * tombstone and dedupe settings. No path deletes the conversation's keys and
 * leaves what the features keep for it.
 */

import type { ResolvedProtocolOptions } from '../src/protocol/options.js';
import type { PurgeResult } from '../src/protocol/purge.js';
import { purgeConversation } from '../src/protocol/purge.js';

/** What one purge asks for besides the conversation. */
export interface PurgeRequest {
  /** Stop an active run (it is told on the control channel, and its writes are refused) and purge. Default false: answer `active`, delete nothing. */
  stopActive?: boolean;
  /** Update key of the `/purge` command that asked: a redelivery of that update answers `duplicate` and does nothing. Default: none (not deduped). */
  updateKey?: string;
}

/**
 * Purges one conversation with every feature's hooks. Throws InvalidInputError
 * for a bad conversation id or update key, writing nothing.
 */
export type Purge = (conversationId: string, request?: PurgeRequest) => Promise<PurgeResult>;

/** What a purge runs of each feature: its `purging` hook (`HostFeature.purging`, host/feature.ts). */
export interface PurgeHooks {
  /** Before the purge: what to do once the conversation is deleted (read now, while it still exists). */
  purging?(conversationId: string): Promise<() => Promise<void>>;
}

/** The settings of the host's dispatch a purge uses. */
export type PurgeSettings = Pick<ResolvedProtocolOptions, 'client' | 'prefix' | 'afterPurge' | 'retention' | 'dedupeTtlSeconds' | 'pluginKeys'>;

/**
 * The host's purge on `settings`, running the `purging` hooks of `features`:
 * each reads what it needs before the script deletes the conversation, and
 * what it returns runs once the script purged it, or found it purged before
 * (not when it was refused, not found or a duplicate).
 */
export function hostPurge(settings: PurgeSettings, features: readonly PurgeHooks[]): Purge {
  return async (conversationId, request = {}) => {
    const after = await Promise.all(features.flatMap((f) => (f.purging ? [f.purging(conversationId)] : [])));
    const r = await purgeConversation(settings.client, settings.prefix, conversationId, {
      stopActive: request.stopActive === true,
      afterPurge: settings.afterPurge,
      tombstoneTtlSeconds: settings.retention.tombstoneTtlSeconds,
      dedupeTtlSeconds: settings.dedupeTtlSeconds,
      ...(request.updateKey !== undefined && { updateKey: request.updateKey }),
      pluginKeys: settings.pluginKeys,
    });
    // Also for one purged before: a purge retried after its hooks failed (the process died) completes them.
    if (r.kind === 'purged' || r.kind === 'already_purged') await Promise.all(after.map((finish) => finish()));
    return r;
  };
}
