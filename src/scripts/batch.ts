/**
 * Group commit for batch scripts (`<verb>-<n>n.lua`): the calls made in one
 * event-loop turn go to Redis as one script call, one round trip, and each
 * caller gets its own item's reply. Under load a host receives many updates
 * per turn; one call for all of them saves the client a command, a write and a
 * reply each, and Redis a script invocation and its I/O. A lone call waits for
 * nothing but the end of the current turn (`setImmediate`).
 *
 * Items keep their order within a call. On Redis Cluster a script may only
 * touch one slot, so only items whose first key has the same hash tag share a
 * call there.
 */
import { ScriptError } from '../errors.js';
import type { RedisClient } from '../redis/connection.js';
import { isBatchScript, runScript, type ScriptName, type ScriptReply, scriptKeyCount } from './index.js';

/** Most items in one script call: bounds how long one call holds Redis (about 20 µs per ingest), and a full call leaves without waiting for the turn to end. */
export const DEFAULT_MAX_BATCH = 16;

interface Item {
  keys: string[];
  args: Array<string | number>;
  resolve: (reply: ScriptReply) => void;
  reject: (err: unknown) => void;
}

/** What one script call carried, for tests and benchmarks. */
export interface BatchStats {
  calls: number;
  items: number;
}

/** The hash tag Redis Cluster hashes a key by (the whole key when it has none). */
export function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** Batches calls of one batch script on one client. */
export class ScriptBatcher {
  private queue: Item[] = [];
  private readonly maxItems: number;
  private readonly keysPerItem: number;
  readonly stats: BatchStats = { calls: 0, items: 0 };

  constructor(
    private readonly client: RedisClient,
    private readonly name: ScriptName,
    opts: { maxItems?: number } = {},
  ) {
    if (!isBatchScript(name)) throw new ScriptError(name, 'is not a batch script');
    this.maxItems = opts.maxItems ?? DEFAULT_MAX_BATCH;
    if (!Number.isInteger(this.maxItems) || this.maxItems < 1) throw new ScriptError(name, `maxItems must be a positive integer, got ${this.maxItems}`);
    this.keysPerItem = scriptKeyCount(name);
  }

  /** Runs one item; resolves with its reply once the call that carried it answers. */
  run(keys: string[], args: Array<string | number>): Promise<ScriptReply> {
    // A malformed item is refused alone, before it can spoil a call it shares (its arguments would shift onto the next item's).
    if (keys.length !== this.keysPerItem || keys.some((k) => k === '')) {
      return Promise.reject(new ScriptError(this.name, `an item takes ${this.keysPerItem} non-empty keys, got ${JSON.stringify(keys)}`));
    }
    if (args.length !== this.keysPerItem) {
      return Promise.reject(new ScriptError(this.name, `an item takes ${this.keysPerItem} arguments, got ${args.length}`));
    }
    return new Promise<ScriptReply>((resolve, reject) => {
      if (this.queue.length === 0) setImmediate(() => this.flush());
      this.queue.push({ keys, args, resolve, reject });
      // A full call leaves at once, so Redis works on it while this turn builds the next.
      if (!this.client.isCluster && this.queue.length >= this.maxItems) this.flush();
    });
  }

  private flush(): void {
    if (this.queue.length === 0) return;
    const items = this.queue;
    this.queue = [];
    for (const group of this.groups(items)) {
      for (let i = 0; i < group.length; i += this.maxItems) void this.call(group.slice(i, i + this.maxItems));
    }
  }

  /** One group on a single node; per hash tag on Cluster. */
  private groups(items: Item[]): Item[][] {
    if (!this.client.isCluster) return [items];
    const bySlot = new Map<string, Item[]>();
    for (const item of items) {
      const tag = hashTag(item.keys[0]!);
      const group = bySlot.get(tag);
      if (group) group.push(item);
      else bySlot.set(tag, [item]);
    }
    return [...bySlot.values()];
  }

  private async call(items: Item[]): Promise<void> {
    this.stats.calls++;
    this.stats.items += items.length;
    let replies: ScriptReply;
    try {
      replies = await runScript(
        this.client,
        this.name,
        items.flatMap((i) => i.keys),
        items.flatMap((i) => i.args),
      );
    } catch (err) {
      for (const item of items) item.reject(err);
      return;
    }
    if (replies.length !== items.length) {
      const err = new ScriptError(this.name, `${replies.length} replies for ${items.length} items`);
      for (const item of items) item.reject(err);
      return;
    }
    items.forEach((item, i) => {
      const reply = replies[i];
      if (Array.isArray(reply)) item.resolve(reply as ScriptReply);
      else item.reject(new ScriptError(this.name, `unexpected reply ${JSON.stringify(reply)}`));
    });
  }
}
