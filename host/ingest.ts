/**
 * The host's ingest service: one atomic ingest script per update, then the
 * BullMQ job of a new run. If the process dies between the two, the
 * reconciler re-enqueues the run.
 */
import type { Logger } from 'pino';
import { InvalidInputError } from '../src/errors.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import type { IncomingMessage, IngestResult, InputPolicy } from '../src/protocol/types.js';
import { isRedisUnavailable } from '../src/redis.js';
import type { RunQueue } from '../src/run-queue.js';
import { metrics } from '../src/telemetry/metrics.js';
import { failSpan, SPAN, type Span, SpanKind, traceparentOf, tracer } from '../src/telemetry/tracing.js';

/** Ingests updates and schedules the runs they create. */
export class IngestService {
  constructor(
    private readonly dispatch: Dispatch,
    private readonly queue: RunQueue,
    private readonly logger?: Logger,
  ) {}

  /**
   * Ingests one normalized message; see `Dispatch.ingest`. Traced as an
   * `ingest` span whose context goes into the record entry (the run that
   * answers the message continues the trace) and counted by `channel`
   * (default: the conversation id's first segment; the channel host passes the channel id).
   */
  async ingest(message: IncomingMessage, opts: { policy?: InputPolicy; channel?: string } = {}): Promise<IngestResult> {
    const channel = opts.channel ?? message.conversationId.split(':', 1)[0]!;
    const span = tracer().startSpan(SPAN.ingest, {
      kind: SpanKind.INTERNAL,
      attributes: { 'steerbot.channel': channel, 'steerbot.conversation_id': message.conversationId, 'steerbot.update_key': message.updateKey },
    });
    try {
      const traceparent = traceparentOf(span);
      // Not made active: nothing inside logs or makes spans, and entering a context costs the hot path.
      const result = await this.dispatch.ingest(message, traceparent ? { ...opts, traceparent } : opts);
      if (result.kind === 'new-run') {
        await this.queue.enqueue(message.conversationId, result.runId);
      }
      noteIngested(span, channel, result);
      this.logger?.debug({ conversationId: message.conversationId, result: result.kind, seq: result.seq }, 'ingested');
      return result;
    } catch (err) {
      metrics.updatesIngested.inc({
        channel,
        result: 'rejected',
        reason: err instanceof InvalidInputError ? 'bad-input' : isRedisUnavailable(err) ? 'redis-unavailable' : 'error',
      });
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  }
}

/** The dispatch result on the ingest span and in `steerbot_updates_ingested_total` (with the depths it reports). */
function noteIngested(span: Span, channel: string, result: IngestResult): void {
  const reason = result.kind === 'pending' ? result.reason : result.kind === 'refused' ? result.limit : result.kind === 'interrupting' ? result.stop : '';
  metrics.updatesIngested.inc({ channel, result: result.kind, reason });
  if (result.kind === 'steered') metrics.steeringDepth.observe(result.depth);
  else if (result.kind === 'pending') metrics.pendingDepth.observe(result.depth);
  if (!span.isRecording()) return;
  span.setAttributes({
    'steerbot.dispatch.result': result.kind,
    'steerbot.seq': result.seq,
    ...(reason && { 'steerbot.dispatch.reason': reason }),
    ...('runId' in result && { 'steerbot.run_id': result.runId }),
  });
}
