/**
 * The host's ingest service: one atomic ingest script per update, then the
 * BullMQ job of a new run. If the process dies between the two, the
 * reconciler re-enqueues the run.
 */
import type { Logger } from 'pino';
import type { Dispatch } from '../src/protocol/dispatch.js';
import type { IncomingMessage, IngestResult, InputPolicy } from '../src/protocol/types.js';
import type { RunQueue } from '../src/run-queue.js';

/** Ingests updates and schedules the runs they create. */
export class IngestService {
  constructor(
    private readonly dispatch: Dispatch,
    private readonly queue: RunQueue,
    private readonly logger?: Logger,
  ) {}

  /** Ingests one normalized message; see `Dispatch.ingest`. */
  async ingest(message: IncomingMessage, opts: { policy?: InputPolicy } = {}): Promise<IngestResult> {
    const result = await this.dispatch.ingest(message, opts);
    if (result.kind === 'new-run') {
      await this.queue.enqueue(message.conversationId, result.runId);
    }
    this.logger?.debug({ conversationId: message.conversationId, result: result.kind, seq: result.seq }, 'ingested');
    return result;
  }
}
