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
import { activeRequestSpan, failSpan, SPAN, type Span, SpanKind, type SpanOptions, traceparentOf, tracer } from '../src/telemetry/tracing.js';

/** Options of an `ingest` span of its own, shared (nothing built per message). */
const INGEST_SPAN: SpanOptions = { kind: SpanKind.INTERNAL };

/** Ingests updates and schedules the runs they create. */
export class IngestService {
  constructor(
    private readonly dispatch: Dispatch,
    private readonly queue: RunQueue,
    private readonly logger?: Logger,
  ) {}

  /**
   * Ingests one normalized message; see `Dispatch.ingest`. Traced on the
   * span active here — the HTTP request's, when the message came over a
   * route: one span per request — or, without one (polling, a gateway), on
   * an `ingest` span of its own. That span's context goes into the record
   * entry (the run that answers the message continues the trace). Counted by
   * `channel` (default: the conversation id's first segment; the channel
   * host passes the channel id).
   */
  async ingest(message: IncomingMessage, opts: { policy?: InputPolicy; channel?: string } = {}): Promise<IngestResult> {
    const channel = opts.channel ?? message.conversationId.split(':', 1)[0]!;
    const request = activeRequestSpan();
    const span = request ?? tracer().startSpan(SPAN.ingest, INGEST_SPAN);
    // Attributes only on a recorded span: a request that is not sampled builds nothing for tracing.
    if (span.isRecording())
      span.setAttributes({ 'steerbot.channel': channel, 'steerbot.conversation_id': message.conversationId, 'steerbot.update_key': message.updateKey });
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
      if (span !== request) span.end(); // the request's span is ended by its route
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
