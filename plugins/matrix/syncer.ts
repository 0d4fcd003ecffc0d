/**
 * The `/sync` long poll, with one syncing host across hosts: whoever holds
 * the Redis lease calls `/sync`, the others stand by and take over once it
 * expires (or is given up on stop). The `since` token is stored in Redis
 * after every answer whose events were all handed to the host, so a
 * restarted or taking-over host resumes where the last one stopped; events
 * handed over twice (a host died between `receive` and storing `since`) are
 * dropped by the host's dedupe (`matrix:<event id>`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { asRedisUnavailable, backoffMs, ChannelApiError, type Logger, type RedisClient, type RedisLease } from 'steerbot/plugin';
import type { MatrixClient } from './client.js';
import { type SyncResponse, syncResponseSchema } from './sync-schema.js';

/** What one `/sync` asks for: rooms' timelines with member counts; no presence, no account data. */
const SYNC_FILTER = JSON.stringify({
  presence: { not_types: ['*'] },
  account_data: { not_types: ['*'] },
  room: {
    timeline: { limit: 50 },
    state: { lazy_load_members: true },
    ephemeral: { not_types: ['*'] },
    account_data: { not_types: ['*'] },
  },
});

const MAX_BACKOFF_MS = 5000;

/** Options of a MatrixSyncer. */
export interface SyncerOptions {
  client: MatrixClient;
  lease: RedisLease;
  redis: RedisClient;
  /** The key `since` is stored at. */
  sinceKey: string;
  /** Long-poll timeout of one `/sync`, in ms. */
  timeoutMs: number;
  logger: Logger;
  /** Handles one answer (`initial`: the first one, without `since`). Throws only on a transient failure: the same `since` is asked again. */
  handle(sync: SyncResponse, initial: boolean): Promise<void>;
}

/** The sync loop and its lease. */
export class MatrixSyncer {
  private stopped = false;
  private holding = false;
  private lastRenewedAt = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private pollAbort: AbortController | undefined;
  private readonly stopAbort = new AbortController();
  private loop: Promise<void> | undefined;
  /** Why the last round failed, until one succeeds (readiness). */
  private failing: string | undefined;

  constructor(private readonly o: SyncerOptions) {}

  /** Readiness: syncing (or standing by for another host's lease) and the last round did not fail. */
  state(): { ready: boolean; detail?: string } {
    if (this.stopped) return { ready: false, detail: 'sync stopped' };
    if (this.failing) return { ready: false, detail: this.failing };
    return this.holding ? { ready: true } : { ready: true, detail: 'standing by (another host syncs)' };
  }

  /** Starts the loop in the background. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops syncing, waits for the answer in hand, and gives the lease up. Never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopAbort.abort();
    this.pollAbort?.abort();
    await this.loop;
    const held = this.holding;
    this.lose();
    if (held) await this.o.lease.release().catch((err: unknown) => this.o.logger.warn({ err }, 'could not release the matrix sync lease'));
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        if (!this.holding && !(await this.takeLease())) continue;
        await this.syncOnce();
        failures = 0;
        this.failing = undefined;
      } catch (err) {
        if (this.stopped) break;
        failures++;
        const retryAfterMs = err instanceof ChannelApiError ? err.retryAfterMs : undefined;
        const waitMs = retryAfterMs ?? backoffMs(Math.min(failures, 6), 250, MAX_BACKOFF_MS);
        this.failing = err instanceof ChannelApiError && err.status !== undefined ? `sync failing (HTTP ${err.status})` : 'sync failing';
        this.o.logger.warn({ err, waitMs }, 'matrix sync failed; retrying');
        await this.pause(waitMs);
      }
    }
  }

  /** Tries to take the lease; on failure waits until it may be free. */
  private async takeLease(): Promise<boolean> {
    const { lease } = this.o;
    const state = await lease.acquire();
    if (!state.held) {
      // A stopped host releases at once; a dead one's lease runs out after msLeft.
      const third = lease.leaseMs / 3;
      await this.pause(state.msLeft > 0 ? Math.max(50, Math.min(state.msLeft, third)) : third);
      return false;
    }
    this.holding = true;
    this.lastRenewedAt = Date.now();
    this.renewTimer = setInterval(() => void this.renew(), Math.max(100, Math.floor(lease.leaseMs / 3)));
    this.o.logger.info({ owner: lease.owner }, 'took the matrix sync lease; syncing');
    return true;
  }

  private async renew(): Promise<void> {
    if (!this.holding) return;
    try {
      const state = await this.o.lease.acquire();
      if (state.held) this.lastRenewedAt = Date.now();
      else this.lose(`host ${state.holder} took the matrix sync lease`);
    } catch (err) {
      this.o.logger.warn({ err }, 'could not renew the matrix sync lease');
      // Without a renewal for a whole lease another host may sync already.
      if (Date.now() - this.lastRenewedAt >= this.o.lease.leaseMs) this.lose('the matrix sync lease could not be renewed');
    }
  }

  /** Stops syncing until the lease is taken again. */
  private lose(why?: string): void {
    if (why && this.holding) this.o.logger.warn(`${why}; standing by`);
    this.holding = false;
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    this.pollAbort?.abort();
  }

  private async syncOnce(): Promise<void> {
    const since = await this.readSince();
    // Checked in the same tick as `pollAbort` is set (after the last await), so `stop()` / `lose()` always abort a poll that started.
    if (this.stopped || !this.holding) return;
    const abort = new AbortController();
    this.pollAbort = abort;
    let answer: Record<string, unknown>;
    try {
      const query: Record<string, string> = { filter: SYNC_FILTER, timeout: String(since === null ? 0 : this.o.timeoutMs) };
      if (since !== null) query.since = since;
      // The call's own timeout leaves the server its long-poll time and a margin.
      answer = await this.o.client.call('sync', 'GET', 'sync', { query, signal: abort.signal, timeoutMs: this.o.timeoutMs + 15_000 });
    } catch (err) {
      if (abort.signal.aborted) return; // stopped, or the lease was lost mid-poll
      throw err;
    } finally {
      this.pollAbort = undefined;
    }
    const sync = syncResponseSchema.parse(answer);
    // After losing the lease the new holder asks for these events again: nothing handled, nothing stored.
    if (!this.holding || this.stopped) return;
    await this.o.handle(sync, since === null);
    if (this.holding) await this.writeSince(sync.next_batch);
  }

  private async readSince(): Promise<string | null> {
    try {
      return await this.o.redis.get(this.o.sinceKey);
    } catch (err) {
      throw asRedisUnavailable(err);
    }
  }

  private async writeSince(since: string): Promise<void> {
    try {
      await this.o.redis.set(this.o.sinceKey, since);
    } catch (err) {
      throw asRedisUnavailable(err);
    }
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stopAbort.signal }).catch(() => undefined);
  }
}
