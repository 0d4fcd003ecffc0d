/**
 * Tracing through `@opentelemetry/api` only. Without an SDK registered (the
 * composition starts one when the `OTEL_*` settings ask for it, see
 * app/telemetry.ts) every call here is the API's no-op: no span is recorded,
 * no trace context is written to the record.
 *
 * One incoming message is one trace across processes: the host's ingest span
 * is written into the message's record entry as a W3C `traceparent`, and the
 * runner that answers it parents its `run` span on it (`contextFromTraceparent`).
 * A trace context that arrives with a request is continued only where its route
 * trusts the caller with it (`HttpRoute.trustsCallerTrace`, see host/http.ts):
 * every other request starts a trace of its own.
 */
import {
  type Attributes,
  type Context,
  context,
  createContextKey,
  INVALID_SPAN_CONTEXT,
  type Link,
  ProxyTracer,
  type ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';

export { type Attributes, type Context, context, type Link, ROOT_CONTEXT, type Span, SpanKind, type SpanOptions, SpanStatusCode, trace };

/** Instrumentation scope of every steerbot span. */
export const TRACER_NAME = 'steerbot';

let cached: { delegate: TracerProvider | undefined; tracer: Tracer; on: boolean } | undefined;

/** The tracer of steerbot's spans and whether a tracing SDK stands behind it, for the registered provider. */
function current(): { tracer: Tracer; on: boolean } {
  // Looked up once per registered provider: `getTracer` builds a key and a map lookup per call, on the ingest hot path.
  const delegate = (trace.getTracerProvider() as ProxyTracerProvider).getDelegate?.();
  if (cached?.delegate !== delegate || !cached) {
    const t = trace.getTracer(TRACER_NAME);
    // Without a registered provider the API hands out a proxy whose spans are the no-op's.
    cached = { delegate, tracer: t, on: !(t instanceof ProxyTracer) };
  }
  return cached;
}

/** The tracer of steerbot's spans (the global provider's; a no-op one until an SDK is registered). */
export function tracer(): Tracer {
  return current().tracer;
}

/** Whether a tracing SDK is registered: without one no span is ever recorded, and hot paths skip tracing altogether. */
export function tracingOn(): boolean {
  return current().on;
}

/** A span that records nothing, shared: what a hot path uses instead of starting a span that cannot be recorded. */
export const NON_RECORDING_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Span names, one place (docs/operations.md lists them). */
export const SPAN = {
  http: 'http.request',
  ingest: 'ingest',
  run: 'run',
  modelCall: 'model.call',
  toolCall: 'tool.call',
  steeringPull: 'steering.pull',
  compaction: 'compaction',
  delivery: 'delivery',
  scheduleFire: 'schedule.fire',
} as const;

const TRACEPARENT_RE = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The W3C `traceparent` of a span, or undefined when the span is not sampled (nothing to continue). */
export function traceparentOf(span: Span): string | undefined {
  if (!span.isRecording()) return undefined;
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A context whose parent is the remote span `traceparent` names; ROOT_CONTEXT when it is absent or malformed. */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  const m = traceparent === undefined ? null : TRACEPARENT_RE.exec(traceparent);
  if (!m) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED, isRemote: true });
}

/** A span link to the remote span `traceparent` names, or undefined. */
export function linkTo(traceparent: string | undefined, attributes?: Attributes): Link | undefined {
  const parent = trace.getSpanContext(contextFromTraceparent(traceparent));
  return parent ? { context: parent, ...(attributes && { attributes }) } : undefined;
}

/**
 * Runs `fn` inside a new active span (a child of the active one, or of
 * `opts.parent`), ends the span when `fn` settles, and marks it as an error
 * when `fn` throws. `fn` sets its own attributes and status otherwise.
 */
export async function inSpan<T>(name: string, opts: SpanOptions & { parent?: Context }, fn: (span: Span) => Promise<T>): Promise<T> {
  const { parent, ...options } = opts;
  const span = tracer().startSpan(name, options, parent ?? context.active());
  try {
    return await context.with(trace.setSpan(parent ?? context.active(), span), () => fn(span));
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span failed with a short, secret-free description (the error's name and code, not its message). */
export function failSpan(span: Span, err: unknown, description?: string): void {
  if (!span.isRecording()) return;
  const e = err as { name?: unknown; code?: unknown } | undefined;
  const kind = typeof e?.code === 'string' ? `${String(e.name ?? 'Error')} ${e.code}` : String(e?.name ?? 'error');
  span.setStatus({ code: SpanStatusCode.ERROR, message: description ?? kind });
  span.setAttribute('error.type', kind);
}

/** `trace_id` / `span_id` of the active span for a log line; empty outside a span or without an SDK. */
export function logTraceFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return {};
  return { trace_id: sc.traceId, span_id: sc.spanId };
}

/**
 * Makes `ctx` the active context for the rest of the calling async function
 * and what it starts (the API's `context.attach`: AsyncLocalStorage
 * `enterWith` under the SDK's context manager), without wrapping that code in
 * a callback. Call it after the function's first `await`, so the caller's own
 * context is untouched. A no-op without a tracing SDK.
 */
export function enterContext(ctx: Context): void {
  context.attach(ctx);
}

const REQUEST_SPAN = createContextKey('steerbot.request_span');

/** `parent` with `span` active and marked as the span of an incoming HTTP request (see `activeRequestSpan`). */
export function requestContext(parent: Context, span: Span): Context {
  return trace.setSpan(parent, span).setValue(REQUEST_SPAN, span);
}

/**
 * The context of every incoming request that is not sampled, built once: it marks the request (the ingest done for it
 * makes no span of its own) and makes no span active, so a request that is not sampled builds no context and logs no
 * trace id. A span something else starts under it is a root, sampled on its own.
 */
export const UNSAMPLED_REQUEST_CONTEXT: Context = ROOT_CONTEXT.setValue(REQUEST_SPAN, NON_RECORDING_SPAN);

/** The span of the HTTP request being served here, when there is one: work done for the request (ingest) records its attributes on it. */
export function activeRequestSpan(): Span | undefined {
  return context.active().getValue(REQUEST_SPAN) as Span | undefined;
}
