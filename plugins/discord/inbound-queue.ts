/**
 * Hands gateway messages to the host one conversation at a time, in arrival
 * order, and keeps retrying a message the host could not take because Redis
 * was unreachable. The gateway has no way to ask Discord for a redelivery
 * (unlike a webhook's 503); this in-memory backlog does not survive the
 * process, and what it still held is read back by the next start's catch-up.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { backoffMs } from 'steerbot/plugin';

/** Options of an InboundQueue. */
export interface InboundQueueOptions {
  /** Retries `err`? Must not throw. */
  retryable(err: unknown): boolean;
  /** First retry delay, in ms; doubles per attempt up to `maxDelayMs`. */
  initialDelayMs: number;
  /** Longest retry delay, in ms. */
  maxDelayMs: number;
  /** Most messages waiting or in flight; a message beyond it is dropped (logged at error). */
  backlog: number;
  logger: Logger;
}

/** Per-conversation serial queues with retry of retryable failures. */
export class InboundQueue {
  private readonly chains = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private inFlight = 0;
  private dropped = 0;

  constructor(private readonly o: InboundQueueOptions) {}

  /** Messages waiting or being handed over. */
  get size(): number {
    return this.inFlight;
  }

  /** Queues `task` behind earlier tasks of the same `key`; false when it was dropped (closed or backlog full). */
  push(key: string, label: Record<string, unknown>, task: () => Promise<void>): boolean {
    if (this.abort.signal.aborted) return false;
    if (this.inFlight >= this.o.backlog) {
      this.o.logger.error(
        { ...label, backlog: this.o.backlog },
        'discord: inbound backlog is full; message dropped (the next start catches up on it, within catchUpMaxAgeSeconds)',
      );
      return false;
    }
    this.inFlight++;
    const chain = (this.chains.get(key) ?? Promise.resolve())
      .then(() => this.runWithRetry(label, task))
      .finally(() => {
        this.inFlight--;
        if (this.chains.get(key) === chain) this.chains.delete(key);
      });
    this.chains.set(key, chain);
    return true;
  }

  /** Resolves once every queued task has settled (tests, shutdown). */
  async drain(): Promise<void> {
    while (this.chains.size > 0) await Promise.all([...this.chains.values()]);
  }

  /** Stops retrying and drops what is still waiting; returns how many messages were dropped. */
  async close(): Promise<number> {
    this.abort.abort();
    await this.drain();
    return this.dropped;
  }

  private async runWithRetry(label: Record<string, unknown>, task: () => Promise<void>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (this.abort.signal.aborted) {
        this.dropped++;
        this.o.logger.error(
          label,
          'discord: shutting down; inbound message not handed to the host (the next start catches up on it, within catchUpMaxAgeSeconds)',
        );
        return;
      }
      try {
        await task();
        if (attempt > 1) this.o.logger.warn({ ...label, attempt }, 'discord: inbound message handed to the host after retrying');
        return;
      } catch (err) {
        if (!this.o.retryable(err)) {
          this.o.logger.warn({ ...label, err }, 'discord: host refused the inbound message; dropped');
          return;
        }
        const delay = backoffMs(attempt, this.o.initialDelayMs, this.o.maxDelayMs);
        const log = attempt === 1 ? this.o.logger.error.bind(this.o.logger) : this.o.logger.warn.bind(this.o.logger);
        log({ ...label, err, attempt, retryInMs: delay }, 'discord: host cannot take the inbound message (Redis unreachable); retrying in memory');
        try {
          await sleep(delay, undefined, { signal: this.abort.signal });
        } catch {
          // aborted: reported at the top of the loop
        }
      }
    }
  }
}
