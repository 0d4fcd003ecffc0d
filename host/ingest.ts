/**
 * The host's ingest service: channel messages go through `ingestInput` (one
 * atomic ingest script per update, then the BullMQ job of a new run).
 */
import type { Logger } from 'pino';
import { type IngestOptions, ingestInput } from '../src/ingest.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import type { RunQueue } from '../src/protocol/run-queue.js';
import type { IncomingMessage, IngestResult } from '../src/protocol/types.js';

/** Ingests updates and schedules the runs they create. */
export class IngestService {
  constructor(
    private readonly dispatch: Dispatch,
    private readonly queue: RunQueue,
    private readonly logger?: Logger,
  ) {}

  /**
   * Ingests one normalized message; see `ingestInput`. Counted by `channel`
   * (default: the conversation id's first segment; the channel host passes the channel id).
   */
  ingest(message: IncomingMessage, opts: IngestOptions = {}): Promise<IngestResult> {
    return ingestInput({ dispatch: this.dispatch, queue: this.queue, logger: this.logger }, message, opts);
  }
}
