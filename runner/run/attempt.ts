/**
 * One attempt at a run, from acquire to release: the fenced acquire, the
 * lease kept alive by heartbeats, stop requests (from the control channel or
 * a heartbeat) turned into an abort, and the attempt's delivery sink. What
 * the attempt does in between is the executor's business.
 */
import type { Logger } from 'pino';
import { runLogger } from '../../src/logger.js';
import type { RunRef } from '../../src/protocol/runs.js';
import type { AcquiredReads, AcquiredRun, StopKind } from '../../src/protocol/types.js';
import { UNANSWERED_KEY } from '../../src/record/unanswered.js';
import { promptHeadReads } from '../compaction/load.js';
import { RunDelivery } from '../delivery/sink.js';
import { keepLease } from './lease.js';
import type { ExecutionResult, ExecutorOptions } from './options.js';

/**
 * What the acquire reads in its own call, for runner/run/start.ts: the prompt
 * head and, beside the checkpoint, the unanswered-messages note an earlier run left.
 */
const START_READS = promptHeadReads([UNANSWERED_KEY]);

/** An acquired attempt; `close()` it when the attempt ends, however it ends. */
export class RunAttempt {
  readonly ref: RunRef;
  readonly logger: Logger;
  readonly delivery: RunDelivery;
  private readonly ac = new AbortController();
  private stop: StopKind | undefined;
  private lost = false;
  private readonly lease: { stop(): void };
  private readonly unregister: () => void;

  /**
   * Acquires the run (fencing token + 1) and starts its lease. Throws
   * LeaseHeldError (retry later), RunEndedError / RunNotFoundError (nothing
   * to do) from acquire.
   */
  static async open(o: ExecutorOptions, conversationId: string, runId: string): Promise<RunAttempt> {
    return new RunAttempt(o, await o.runs.acquire(conversationId, runId, o.settings.owner, o.settings.leaseMs, START_READS));
  }

  private constructor(
    o: ExecutorOptions,
    /** The acquired run, with what its acquire read for the attempt's start (`START_READS`). */
    readonly acquired: AcquiredRun & { read: AcquiredReads },
  ) {
    const { conversationId, runId, token } = acquired;
    this.ref = { conversationId, runId, token };
    this.logger = runLogger(o.logger, conversationId, runId, { attempt: acquired.attempt });
    this.stop = acquired.stop;
    const onStop = (kind: StopKind) => this.requestStop(kind);
    this.unregister = o.control.register(runId, onStop);
    this.lease = keepLease({
      runs: o.runs,
      run: this.ref,
      heartbeatMs: o.settings.heartbeatMs,
      leaseMs: o.settings.leaseMs,
      onStop,
      logger: this.logger,
      onLost: () => {
        this.lost = true;
        this.ac.abort('lost');
      },
    });
    this.delivery = new RunDelivery({
      client: o.client,
      prefix: o.prefix,
      conversationId,
      runId,
      token,
      resolve: o.channels.outbound,
      logger: this.logger,
      outboxTtlSeconds: o.settings.outboxTtlSeconds,
      outboxMaxEntries: o.settings.outboxMaxEntries,
    });
  }

  /** Aborted on a stop request, a lost lease, or shutdown (`abort`). */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** The stop requested for the run, if any (before it started, or while it runs). */
  get stopKind(): StopKind | undefined {
    return this.stop;
  }

  /** Aborts the attempt without finishing it (`shutdown`): the run stays recoverable. */
  abort(reason: string): void {
    this.ac.abort(reason);
  }

  /** How the attempt ends without finishing the run: `lost` to another attempt, or `aborted` at shutdown; undefined when it may finish. */
  interruption(): ExecutionResult | undefined {
    if (this.lost) return { kind: 'lost' };
    if (this.ac.signal.aborted && this.ac.signal.reason === 'shutdown') return { kind: 'aborted' };
    return undefined;
  }

  /** Stops the heartbeats and the control subscription, and closes the delivery sink. */
  close(): void {
    this.lease.stop();
    this.unregister();
    this.delivery.close();
  }

  private requestStop(kind: StopKind): void {
    if (this.stop) return;
    this.stop = kind;
    this.logger.info({ stop: kind }, 'stop requested');
    this.ac.abort(kind);
  }
}
