/**
 * Long polling with one poller across hosts: whoever holds the Redis lease
 * calls getUpdates, the others stand by and take over once it expires (or is
 * given up on stop). The offset lives in memory only: after a takeover the
 * new poller fetches the updates its predecessor had not confirmed yet, and
 * the host's dedupe (`telegram:<update_id>`) drops the ones already ingested.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Api } from 'grammy';
import { backoffMs, ChannelApiError, type Logger, type RedisLease } from 'steerbot/plugin';
import { isApiCallError, toChannelApiError } from './errors.js';

/** Options of a TelegramPoller. */
export interface PollerOptions {
  api: Api;
  lease: RedisLease;
  /** The bot token, only to redact it from logged errors. */
  token: string;
  /** Long-poll timeout of one getUpdates call, in seconds. */
  pollTimeoutSeconds: number;
  logger: Logger;
  /**
   * Handles one raw update. Throws only on a transient failure (Redis down):
   * polling then backs off and fetches the same update again.
   */
  handle(update: unknown): Promise<void>;
}

const MAX_BACKOFF_MS = 5000;

/** The polling loop and its lease. */
export class TelegramPoller {
  private stopped = false;
  private holding = false;
  private lastRenewedAt = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private pollAbort: AbortController | undefined;
  private readonly stopAbort = new AbortController();
  private loop: Promise<void> | undefined;
  private offset: number | undefined;
  private webhookCleared = false;
  /** Why the last polling round failed, until one succeeds (readiness). */
  private failing: string | undefined;

  constructor(private readonly opts: PollerOptions) {}

  /** Readiness: polling (or standing by for another host's lease) and the last round did not fail. */
  state(): { ready: boolean; detail?: string } {
    if (this.stopped) return { ready: false, detail: 'polling stopped' };
    if (this.failing) return { ready: false, detail: this.failing };
    return this.holding ? { ready: true } : { ready: true, detail: 'standing by (another host polls)' };
  }

  /** Starts the loop in the background. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops polling, waits for the update in hand, and gives the lease up. Never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopAbort.abort();
    this.pollAbort?.abort();
    await this.loop;
    const held = this.holding;
    this.lose();
    if (held) {
      await this.opts.lease.release().catch((err: unknown) => this.opts.logger.warn({ err }, 'could not release the polling lease'));
    }
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        if (!this.holding && !(await this.takeLease())) continue;
        if (!this.webhookCleared) {
          // getUpdates is refused while a webhook is set.
          await this.opts.api.deleteWebhook({ drop_pending_updates: false });
          this.webhookCleared = true;
        }
        await this.pollOnce();
        failures = 0;
        this.failing = undefined;
      } catch (err) {
        if (this.stopped) break;
        failures++;
        // Telegram's errors are rebuilt without the token; Redis and host errors are logged as they are.
        const safe = isApiCallError(err) ? toChannelApiError(err, 'getUpdates', this.opts.token) : err;
        const retryAfterMs = safe instanceof ChannelApiError ? safe.retryAfterMs : undefined;
        const waitMs = retryAfterMs ?? backoffMs(Math.min(failures, 6), 250, MAX_BACKOFF_MS);
        this.failing = safe instanceof ChannelApiError && safe.status !== undefined ? `polling failing (HTTP ${safe.status})` : 'polling failing';
        this.opts.logger.warn({ err: safe, waitMs }, 'telegram polling failed; retrying');
        await this.pause(waitMs);
      }
    }
  }

  /** Tries to take the lease; on success prepares for polling, else waits until it may be free. */
  private async takeLease(): Promise<boolean> {
    const { lease, logger } = this.opts;
    const state = await lease.acquire();
    if (!state.held) {
      // A stopped poller releases at once; a dead one's lease runs out after msLeft.
      const third = lease.leaseMs / 3;
      await this.pause(state.msLeft > 0 ? Math.max(50, Math.min(state.msLeft, third)) : third);
      return false;
    }
    this.holding = true;
    this.lastRenewedAt = Date.now();
    this.offset = undefined;
    this.renewTimer = setInterval(() => void this.renew(), Math.max(100, Math.floor(lease.leaseMs / 3)));
    this.webhookCleared = false;
    logger.info({ owner: lease.owner }, 'took the telegram polling lease; polling');
    return true;
  }

  private async renew(): Promise<void> {
    if (!this.holding) return;
    try {
      const state = await this.opts.lease.acquire();
      if (state.held) this.lastRenewedAt = Date.now();
      else this.lose(`host ${state.holder} took the polling lease`);
    } catch (err) {
      this.opts.logger.warn({ err }, 'could not renew the telegram polling lease');
      // Without a renewal for a whole lease another host may poll already.
      if (Date.now() - this.lastRenewedAt >= this.opts.lease.leaseMs) this.lose('the polling lease could not be renewed');
    }
  }

  /** Stops polling until the lease is taken again. */
  private lose(why?: string): void {
    if (why && this.holding) this.opts.logger.warn(`${why}; standing by`);
    this.holding = false;
    clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    this.pollAbort?.abort();
  }

  private async pollOnce(): Promise<void> {
    // Checked in the same tick as `pollAbort` is set, so `stop()` / `lose()` always abort a poll that started.
    if (this.stopped || !this.holding) return;
    const abort = new AbortController();
    this.pollAbort = abort;
    let updates: Awaited<ReturnType<Api['getUpdates']>>;
    try {
      updates = await this.opts.api.getUpdates(
        { ...(this.offset !== undefined && { offset: this.offset }), timeout: this.opts.pollTimeoutSeconds, allowed_updates: ['message', 'callback_query'] },
        // grammY types the signal as its polyfill's; it only listens for `abort`, which a native signal fires.
        abort.signal as unknown as Parameters<Api['getUpdates']>[1],
      );
    } catch (err) {
      if (abort.signal.aborted) return; // stopped, or the lease was lost mid-poll
      throw err;
    } finally {
      this.pollAbort = undefined;
    }
    for (const update of updates) {
      // After losing the lease, leave the rest to the new poller.
      if (!this.holding || this.stopped) return;
      await this.opts.handle(update);
      this.offset = update.update_id + 1;
    }
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stopAbort.signal }).catch(() => undefined);
  }
}
