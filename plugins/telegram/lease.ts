/**
 * A Redis lease held by one owner at a time (the one long-polling host).
 * Taking, extending and giving it up are scripts (`lease-acquire`,
 * `lock-release`), so a host never extends a lease another host took over in between.
 */
import type { RedisClient } from 'steerbot/channel';
import { runScript } from '../../src/scripts/index.js';

/** What `acquire` found. */
export type LeaseState =
  | { held: true }
  /** Another owner holds the lease for `msLeft` more ms. */
  | { held: false; msLeft: number; holder: string };

/** One owner's handle on a lease key. */
export class RedisLease {
  /**
   * @param key The lease key.
   * @param owner This owner's id (unique per process and plugin instance).
   * @param leaseMs Lease length, in ms, from each successful `acquire`.
   */
  constructor(
    private readonly redis: RedisClient,
    readonly key: string,
    readonly owner: string,
    readonly leaseMs: number,
  ) {}

  /** Takes the lease when it is free, or extends it when this owner holds it. */
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
