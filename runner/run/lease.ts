/**
 * Keeps a run's lease alive with heartbeats. A stale token (another worker
 * took the run over) calls `onLost`; a stop request seen in a heartbeat
 * calls `onStop`.
 */
import type { Logger } from 'pino';
import { RunEndedError, RunNotFoundError, StaleRunError } from '../../src/errors.js';
import type { RunRef, Runs } from '../../src/protocol/runs.js';
import type { StopKind } from '../../src/protocol/types.js';
import { isRedisUnavailable } from '../../src/redis/connection.js';

export interface LeaseKeeperOptions {
  runs: Runs;
  run: RunRef;
  /** Heartbeat period, in ms. */
  heartbeatMs: number;
  /** Lease length set by each heartbeat, in ms. */
  leaseMs: number;
  onStop(kind: StopKind): void;
  onLost(): void;
  logger: Logger;
}

/** Starts heartbeating; returns `stop()`. */
export function keepLease(o: LeaseKeeperOptions): { stop(): void } {
  let stopped = false;
  const beat = async () => {
    try {
      const { stop } = await o.runs.heartbeat(o.run, o.leaseMs);
      if (stop && !stopped) o.onStop(stop);
    } catch (err) {
      if (stopped) return;
      if (err instanceof StaleRunError || err instanceof RunEndedError || err instanceof RunNotFoundError) {
        o.logger.warn({ err }, 'lost the run to another attempt');
        o.onLost();
      } else if (isRedisUnavailable(err)) {
        // Redis blip: the lease may still be live; the next beat retries. The outage is logged once per process.
        o.logger.debug({ err }, 'heartbeat failed: redis unreachable');
      } else {
        o.logger.warn({ err }, 'heartbeat failed');
      }
    }
  };
  const timer = setInterval(() => void beat(), o.heartbeatMs);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
