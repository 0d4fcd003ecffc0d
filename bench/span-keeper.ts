/**
 * The benches' in-process trace sink: with BENCH_TRACED=1 a steerbot process
 * registers a tracer provider (every span sampled) whose processor keeps each
 * ended span's name, trace and times, exported nowhere; the bench asks for
 * them over IPC.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { type ReadableSpan, type SpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

/** A span as the benches keep it: name, trace id, start and end (ms since the epoch). */
export type SpanRecord = [string, string, number, number];

/** Keeps every ended span's name, trace and times. */
class KeepSpans implements SpanProcessor {
  readonly spans: SpanRecord[] = [];
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    const ms = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;
    this.spans.push([span.name, span.spanContext().traceId, ms(span.startTime), ms(span.endTime)]);
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/** With BENCH_TRACED=1, registers the tracing SDK with the keeping processor; the spans kept since the last call, taken. */
export function keepSpans(): () => SpanRecord[] {
  if (process.env.BENCH_TRACED !== '1') return () => [];
  const keep = new KeepSpans();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [keep] }));
  return () => keep.spans.splice(0);
}

/** Each trace's spans by name (the first of a name), as [start, end]; `nameOf` maps a span's name first. */
export function spansByTrace(spans: readonly SpanRecord[], nameOf: (name: string) => string = (n) => n): Map<string, Map<string, [number, number]>> {
  const byTrace = new Map<string, Map<string, [number, number]>>();
  for (const [raw, traceId, start, end] of spans) {
    const name = nameOf(raw);
    let t = byTrace.get(traceId);
    if (!t) byTrace.set(traceId, (t = new Map()));
    if (!t.has(name)) t.set(name, [start, end]);
  }
  return byTrace;
}
