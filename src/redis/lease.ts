/**
 * A Redis lease (a lock with a lifetime) held by one owner at a time: one
 * long-polling host, one host sending a conversation's callbacks. Taking,
 * extending and giving it up are scripts (`lease-acquire`, `lock-release`),
 * so an owner never extends or frees a lease another owner took over in between.
 * A plugin script may take, check or give up the lease itself, beside its own
 * keys of the lease key's slot, with the same steps (`--- @include "lease"`).
 */

import { runScript } from '../scripts/index.js';
import type { RedisClient } from './connection.js';

/** What `acquire` found. */
export type LeaseState =
  | { held: true }
  /** Another owner holds the lease for `msLeft` more ms. */
  | { held: false; msLeft: number; holder: string };

/** One owner's handle on a lease key. */
export class RedisLease {
  /**
   * @param redis The connection the scripts run on.
   * @param key The lease key (a plugin's `PluginStorage.key` or `conversationKey`).
   * @param owner This owner's id (unique per process and plugin instance).
   * @param leaseMs Lease length, in ms, from each successful `acquire`.
   */
  constructor(
    private readonly redis: RedisClient,
    readonly key: string,
    readonly owner: string,
    readonly leaseMs: number,
  ) {}

  /** Takes the lease when it is free, or extends it by `leaseMs` from now when this owner holds it. */
  async acquire(): Promise<LeaseState> {
    const reply = await runScript(this.redis, 'lease-acquire', [this.key], [this.owner, this.leaseMs]);
    if (reply[0] === 1) return { held: true };
    return { held: false, msLeft: Number(reply[1]), holder: String(reply[2] ?? '') };
  }

  /** Gives the lease up when this owner still holds it; true when it did. */
  async release(): Promise<boolean> {
    return (await runScript(this.redis, 'lock-release', [this.key], [this.owner]))[0] === 1;
  }
}
