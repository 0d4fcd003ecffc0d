/**
 * A long-poll loop held by one host across hosts (a channel's polling:
 * Telegram's getUpdates, Matrix's `/sync`): whoever holds the Redis lease
 * polls, renewing it every third of its time; the others stand by and take
 * over once it runs out or is given up on stop. A poll in flight is aborted
 * when the lease is lost or the loop stops; a failed round backs off
 * (a platform's `retryAfterMs` first). Each channel says what one round is.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { backoffMs } from '../backoff.js';
import { ChannelApiError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RedisLease } from './lease.js';

/** Longest wait between two failed rounds, in ms. */
const MAX_BACKOFF_MS = 5000;

/** What a channel's loop is. */
export interface LeasedPollOptions<P, T> {
  lease: RedisLease;
  logger: Logger;
  /** What the loop does, for readiness: `polling` (`polling failing (HTTP 502)`), `sync`. */
  name: string;
  /** Its lease, for logs: `telegram polling`, `matrix sync`. */
  leaseName: string;
  /** Readiness while another host holds the lease: `another host polls`. */
  standby: string;
  /** Before each round, with the lease held (e.g. read the stored position). */
  prepare(): Promise<P>;
  /** The long poll itself; `signal` aborts it when the lease is lost or the loop stops. */
  poll(prepared: P, signal: AbortSignal): Promise<T>;
  /** Hands a round's answer over; `active()` says whether the lease is still held (stop handing over when not). */
  deliver(answer: T, prepared: P, active: () => boolean): Promise<void>;
  /** Each time the lease is taken (e.g. forget an in-memory position). */
  onLeaseTaken?(): void;
  /** The error as logged (e.g. rebuilt without a token). Default: as thrown. */
  safeError?(err: unknown): unknown;
}

/** The loop and its lease. */
export class LeasedPoll<P, T> {
  private stopped = false;
  private holding = false;
  private lastRenewedAt = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private pollAbort: AbortController | undefined;
  private readonly stopAbort = new AbortController();
  private loop: Promise<void> | undefined;
  /** Why the last round failed, until one succeeds (readiness). */
  private failing: string | undefined;

  constructor(private readonly o: LeasedPollOptions<P, T>) {}

  /** Readiness: polling (or standing by for another host's lease) and the last round did not fail. */
  state(): { ready: boolean; detail?: string } {
    if (this.stopped) return { ready: false, detail: `${this.o.name} stopped` };
    if (this.failing) return { ready: false, detail: this.failing };
    return this.holding ? { ready: true } : { ready: true, detail: `standing by (${this.o.standby})` };
  }

  /** Starts the loop in the background. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops, waits for the answer in hand, and gives the lease up. Never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopAbort.abort();
    this.pollAbort?.abort();
    await this.loop;
    const held = this.holding;
    this.lose();
    if (held) await this.o.lease.release().catch((err: unknown) => this.o.logger.warn({ err }, `could not release the ${this.o.leaseName} lease`));
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        if (!this.holding && !(await this.takeLease())) continue;
        await this.round();
        failures = 0;
        this.failing = undefined;
      } catch (err) {
        if (this.stopped) break;
        failures++;
        const safe = this.o.safeError ? this.o.safeError(err) : err;
        const retryAfterMs = safe instanceof ChannelApiError ? safe.retryAfterMs : undefined;
        const waitMs = retryAfterMs ?? backoffMs(Math.min(failures, 6), 250, MAX_BACKOFF_MS);
        this.failing = safe instanceof ChannelApiError && safe.status !== undefined ? `${this.o.name} failing (HTTP ${safe.status})` : `${this.o.name} failing`;
        this.o.logger.warn({ err: safe, waitMs }, `${this.o.leaseName} failed; retrying`);
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
    this.o.onLeaseTaken?.();
    this.renewTimer = setInterval(() => void this.renew(), Math.max(100, Math.floor(lease.leaseMs / 3)));
    this.o.logger.info({ owner: lease.owner }, `took the ${this.o.leaseName} lease`);
    return true;
  }

  private async renew(): Promise<void> {
    if (!this.holding) return;
    try {
      const state = await this.o.lease.acquire();
      if (state.held) this.lastRenewedAt = Date.now();
      else this.lose(`host ${state.holder} took the ${this.o.leaseName} lease`);
    } catch (err) {
      this.o.logger.warn({ err }, `could not renew the ${this.o.leaseName} lease`);
      // Without a renewal for a whole lease another host may poll already.
      if (Date.now() - this.lastRenewedAt >= this.o.lease.leaseMs) this.lose(`the ${this.o.leaseName} lease could not be renewed`);
    }
  }

  /** Stops polling until the lease is taken again. */
  private lose(why?: string): void {
    if (why && this.holding) this.o.logger.warn(`${why}; standing by`);
    this.holding = false;
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    this.pollAbort?.abort();
  }

  private readonly active = () => this.holding && !this.stopped;

  private async round(): Promise<void> {
    const prepared = await this.o.prepare();
    // Checked in the same tick as `pollAbort` is set (after the last await), so `stop()` / `lose()` always abort a poll that started.
    if (!this.active()) return;
    const abort = new AbortController();
    this.pollAbort = abort;
    let answer: T;
    try {
      answer = await this.o.poll(prepared, abort.signal);
    } catch (err) {
      if (abort.signal.aborted) return; // stopped, or the lease was lost mid-poll
      throw err;
    } finally {
      this.pollAbort = undefined;
    }
    // After losing the lease the new holder asks for the same again: nothing handed over.
    if (this.active()) await this.o.deliver(answer, prepared, this.active);
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stopAbort.signal }).catch(() => undefined);
  }
}
