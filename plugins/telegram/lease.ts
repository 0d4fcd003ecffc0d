/**
 * A Redis lease held by one owner at a time (the one long-polling host).
 * Taking, extending and giving it up are Lua scripts in this folder, so a
 * host never extends a lease another host took over in between.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { RedisClient } from '../../src/redis.js';

const SCRIPTS = {
  acquire: { command: 'sb_telegram_lease_acquire', file: 'acquire-lease-1.lua', numberOfKeys: 1 },
  release: { command: 'sb_telegram_lease_release', file: 'release-lease-1.lua', numberOfKeys: 1 },
} as const;
const defined = new WeakSet<object>();

function defineLeaseScripts(client: RedisClient): void {
  if (defined.has(client)) return;
  for (const s of Object.values(SCRIPTS)) {
    const lua = readFileSync(fileURLToPath(new URL(s.file, import.meta.url)), 'utf8');
    client.defineCommand(s.command, { lua, numberOfKeys: s.numberOfKeys });
  }
  defined.add(client);
}

type Command = (...args: Array<string | number>) => Promise<unknown>;

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

  private command(name: keyof typeof SCRIPTS): Command {
    defineLeaseScripts(this.redis);
    const fn = (this.redis as unknown as Record<string, Command>)[SCRIPTS[name].command];
    if (!fn) throw new Error(`lease script ${name} is not registered`);
    return fn.bind(this.redis);
  }

  /** Takes the lease when it is free, or extends it when this owner holds it. */
  async acquire(): Promise<LeaseState> {
    const reply = (await this.command('acquire')(this.key, this.owner, this.leaseMs)) as [number, number, string?];
    if (reply[0] === 1) return { held: true };
    return { held: false, msLeft: Number(reply[1]), holder: String(reply[2] ?? '') };
  }

  /** Gives the lease up when this owner still holds it; true when it did. */
  async release(): Promise<boolean> {
    return (await this.command('release')(this.key, this.owner)) === 1;
  }
}
