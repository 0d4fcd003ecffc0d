/**
 * The platform calls of one run's delivery: serialized (edits and sends
 * never overtake each other), held while a 429 holds the conversation, and
 * retried a bounded number of times on rate limits (after `retryAfterMs`)
 * and 5xx (exponential backoff).
 */
import type { Logger } from 'pino';
import { backoffMs } from '../../src/backoff.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { ChannelApiError } from '../../src/errors.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { trace } from '../../src/telemetry/tracing.js';
import { heldUntil, holdUntil } from './rate-hold.js';

/** Retry settings and seams of a run's platform calls. */
export interface PlatformCallOptions {
  conversationId: string;
  logger: Logger;
  /** Most attempts of one send / edit that is rate-limited (429) or fails with a 5xx. Default 5. */
  maxAttempts?: number;
  /** First wait after a 5xx, in ms; doubles per attempt. Default 500. */
  retryBaseMs?: number;
  /** Longest wait between two attempts, in ms (a longer `retry_after` is cut to this). Default 30000. */
  maxRetryDelayMs?: number;
  /** Clock, ms since the epoch. */
  now: () => number;
  /** Waits `ms`. */
  sleep: (ms: number) => Promise<void>;
}

/** Serialization, 429 holds and retries of one run's platform calls. */
export class PlatformCalls {
  /** Serializes every platform call of this run, so edits and sends never overtake each other. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly outbound: ChannelOutbound | undefined,
    private readonly o: PlatformCallOptions,
  ) {}

  /** The conversation's channel id (its outbound side's; without one, the id's first segment), for metric labels. */
  channelId(): string {
    return this.outbound?.channelId ?? this.o.conversationId.split(':', 1)[0]!;
  }

  /** Runs `task` after every task queued before it; never rejects (a failure is logged). */
  enqueue(task: () => Promise<void>): Promise<void> {
    const run = this.chain.then(task).catch((err: unknown) => this.o.logger.error({ err }, 'delivery failed'));
    this.chain = run;
    return run;
  }

  /**
   * Holds every later platform call of this conversation for a 429's
   * `retryAfterMs` (cut to `maxRetryDelayMs`); returns the wait in ms.
   */
  hold(retryAfterMs: number): number {
    const wait = Math.min(Math.max(0, retryAfterMs), this.o.maxRetryDelayMs ?? DEFAULTS.deliveryMaxRetryDelayMs);
    if (this.outbound) holdUntil(this.outbound, this.o.conversationId, this.o.now() + wait, this.o.now());
    return wait;
  }

  /** True while a 429 holds this conversation. */
  held(): boolean {
    return this.outbound !== undefined && heldUntil(this.outbound, this.o.conversationId, this.o.now()) !== 0;
  }

  /** Waits until no 429 holds this conversation (set by any call of this run, or of an earlier run in this process). */
  async waitHold(): Promise<void> {
    if (!this.outbound) return;
    // Checked again after the wait: a timer may fire a millisecond early on the wall clock. Bounded, for injected clocks.
    for (let i = 0; i < 3; i++) {
      const until = heldUntil(this.outbound, this.o.conversationId, this.o.now());
      if (until === 0) return;
      await this.o.sleep(until - this.o.now());
    }
  }

  /** Runs a platform call, retrying rate limits (after `retryAfterMs`) and 5xx (exponential backoff), at most `maxAttempts` times. */
  async withRetry<T>(key: string, call: () => Promise<T>): Promise<T> {
    const maxAttempts = this.o.maxAttempts ?? DEFAULTS.deliveryMaxAttempts;
    for (let attempt = 1; ; attempt++) {
      // Later attempts come after this loop's own wait; the first waits out a hold set by any earlier call.
      if (attempt === 1) await this.waitHold();
      try {
        return await call();
      } catch (err) {
        // A 429 holds every later call of the conversation, also when this one gives up.
        const held = err instanceof ChannelApiError && err.retryAfterMs !== undefined ? this.hold(err.retryAfterMs) : undefined;
        if (!(err instanceof ChannelApiError) || attempt >= maxAttempts) throw err;
        const delay = this.retryDelay(err, held, attempt);
        if (delay === undefined) throw err;
        // `deliveryAttempt`, not `attempt`: the run's logger already carries the run's `attempt`.
        this.o.logger.warn({ deliveryKey: key, deliveryAttempt: attempt, delayMs: delay, status: err.status }, 'channel call failed; retrying');
        noteRetry(this.channelId(), held !== undefined, delay, attempt);
        await this.o.sleep(delay);
      }
    }
  }

  /** The wait before retrying a failed call: the 429's hold, a 5xx's backoff (capped); undefined when it is not worth a retry. */
  private retryDelay(err: ChannelApiError, held: number | undefined, attempt: number): number | undefined {
    let delay: number;
    if (held !== undefined) delay = held;
    else if (err.status !== undefined && err.status >= 500) delay = backoffMs(attempt, this.o.retryBaseMs ?? 500);
    else return undefined;
    return Math.min(Math.max(0, delay), this.o.maxRetryDelayMs ?? DEFAULTS.deliveryMaxRetryDelayMs);
  }
}

const rateLimitRetries = new WeakMap<object, number>();

/** A retried platform call: counted, and on the active `delivery` span (attempts so far, retries after 429, time waited). */
function noteRetry(channel: string, rateLimited: boolean, delayMs: number, attempt: number): void {
  metrics.deliveryRetries.inc({ channel, reason: rateLimited ? 'rate_limit' : 'server_error' });
  if (rateLimited) metrics.rateLimitWait.inc({ channel }, delayMs / 1000);
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  span.setAttribute('steerbot.delivery.attempts', attempt + 1);
  if (rateLimited) {
    const n = (rateLimitRetries.get(span) ?? 0) + 1;
    rateLimitRetries.set(span, n);
    span.setAttribute('steerbot.delivery.rate_limit_retries', n);
  }
  span.addEvent('retry', { 'steerbot.delivery.attempt': attempt, 'steerbot.delivery.rate_limited': rateLimited, 'steerbot.delivery.wait_ms': delayMs });
}
