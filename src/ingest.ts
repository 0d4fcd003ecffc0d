/**
 * Ingest of one input, whoever sends it: the atomic ingest script, then the
 * BullMQ job of a new run. If the process dies between the two, the
 * reconciler re-enqueues the run. The host's `IngestService` and
 * `ingestEvent` both go through here, so there is one path into a conversation.
 */
import type { Logger } from 'pino';
import { InvalidInputError } from './errors.js';
import type { Dispatch } from './protocol/dispatch.js';
import type { RunQueue } from './protocol/run-queue.js';
import type { IncomingMessage, IngestResult, InputPolicy } from './protocol/types.js';
import { isRedisUnavailable } from './redis/connection.js';
import { metrics } from './telemetry/metrics.js';
import {
  type Attributes,
  activeRequestSpan,
  failSpan,
  NON_RECORDING_SPAN,
  SPAN,
  type Span,
  SpanKind,
  type SpanOptions,
  traceparentOf,
  tracer,
  tracingOn,
} from './telemetry/tracing.js';

/** Options of an `ingest` span of its own, shared (nothing built per message). */
const INGEST_SPAN: SpanOptions = { kind: SpanKind.INTERNAL };

/** What `ingestInput` writes with. */
export interface IngestDeps {
  dispatch: Pick<Dispatch, 'ingest'>;
  queue: Pick<RunQueue, 'enqueue'>;
  logger?: Logger | undefined;
}

/** Options of one ingest. */
export interface IngestOptions {
  /** The channel's policy (the conversation's `/queue` override still wins). Default: dispatch's default. */
  policy?: InputPolicy;
  /** Metric label. Default: the conversation id's first segment. */
  channel?: string;
}

/**
 * Ingests one normalized input; see `Dispatch.ingest`. Traced on the span
 * active here — the HTTP request's, when the input came over a route: one
 * span per request — or, without one (polling, a gateway, an event), on an
 * `ingest` span of its own. That span's context goes into the record entry
 * (the run that answers the input continues the trace). Counted by `channel`.
 */
export async function ingestInput(deps: IngestDeps, message: IncomingMessage, opts: IngestOptions = {}): Promise<IngestResult> {
  const channel = opts.channel ?? message.conversationId.split(':', 1)[0]!;
  const request = activeRequestSpan();
  // Without a tracing SDK no span is started; under a request that is not sampled, the request's shared non-recording one.
  const span = request ?? (tracingOn() ? tracer().startSpan(SPAN.ingest, INGEST_SPAN) : NON_RECORDING_SPAN);
  try {
    const traceparent = traceparentOf(span);
    // Not made active: nothing inside logs or makes spans, and entering a context costs the hot path.
    const result = await deps.dispatch.ingest(message, traceparent ? { ...opts, traceparent } : opts);
    if (result.kind === 'new-run') {
      await deps.queue.enqueue(message.conversationId, result.runId);
    }
    noteIngested(span, channel, message, result);
    deps.logger?.debug({ conversationId: message.conversationId, result: result.kind, seq: result.seq }, 'ingested');
    return result;
  } catch (err) {
    metrics.updatesIngested.inc({
      channel,
      result: 'rejected',
      reason: err instanceof InvalidInputError ? 'bad-input' : isRedisUnavailable(err) ? 'redis-unavailable' : 'error',
    });
    if (span.isRecording()) span.setAttributes(inputAttributes(channel, message));
    failSpan(span, err);
    throw err;
  } finally {
    if (span !== request) span.end(); // the request's span is ended by its route
  }
}

/** The input's attributes on the span that carries its ingest. */
function inputAttributes(channel: string, message: IncomingMessage): Attributes {
  return {
    'steerbot.channel': channel,
    'steerbot.conversation_id': message.conversationId,
    'steerbot.update_key': message.updateKey,
    'steerbot.origin': message.origin?.kind,
  };
}

/**
 * The dispatch result in `steerbot_updates_ingested_total` (with the depths it reports) and, on a recorded span, with
 * the input's attributes in one call: a span that is not recorded gets nothing built for it.
 */
function noteIngested(span: Span, channel: string, message: IncomingMessage, result: IngestResult): void {
  const reason = result.kind === 'pending' ? result.reason : result.kind === 'refused' ? result.limit : result.kind === 'interrupting' ? result.stop : '';
  metrics.updatesIngested.inc({ channel, result: result.kind, reason });
  if (result.kind === 'steered') metrics.steeringDepth.observe(result.depth);
  else if (result.kind === 'pending') metrics.pendingDepth.observe(result.depth);
  if (!span.isRecording()) return;
  const attributes = inputAttributes(channel, message);
  attributes['steerbot.dispatch.result'] = result.kind;
  attributes['steerbot.seq'] = result.seq;
  if (reason) attributes['steerbot.dispatch.reason'] = reason;
  if ('runId' in result) attributes['steerbot.run_id'] = result.runId;
  span.setAttributes(attributes);
}
