/**
 * Spans and metrics of an agent loop's work: `model.call` per model step and
 * `tool.call` per tool call, both children of the active `run` span. Tool
 * arguments and results are recorded only when opted in
 * (`captureToolPayloads`), redacted and truncated.
 */
import { redactSecrets } from '../errors.js';
import { metrics } from './metrics.js';
import { type Context, context, failSpan, SPAN, SpanKind, SpanStatusCode, trace, tracer } from './tracing.js';

/** Longest tool argument / result text put on a span, in characters. */
const MAX_PAYLOAD_CHARS = 1000;

let payloads = false;

/** Records tool arguments and results on `tool.call` spans (redacted, truncated). Default off: they may hold user data. */
export function captureToolPayloads(on: boolean): void {
  payloads = on;
}

/** Usage a provider reported for one step. */
export interface CallUsage {
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  cachedInputTokens?: number | undefined;
}

/** One model call in progress. */
export interface ModelCallTrace {
  /** Call on every streamed part: the first one sets the time to first token. */
  part(): void;
  /** Ends the call: `ok` with its finish reason and usage, `error` or `aborted`. */
  end(outcome: 'ok' | 'error' | 'aborted', details?: { finishReason?: string; usage?: CallUsage; error?: unknown }): void;
}

/** Starts a `model.call` span (child of the active span, not made active: tool calls are the run's children). */
export function traceModelCall(model: string, step: number): ModelCallTrace {
  const startedAt = performance.now();
  const span = tracer().startSpan(SPAN.modelCall, { kind: SpanKind.CLIENT, attributes: { 'gen_ai.request.model': model, 'steerbot.step': step } });
  let firstAt: number | undefined;
  let ended = false;
  return {
    part() {
      if (firstAt !== undefined) return;
      firstAt = performance.now();
      const ttft = (firstAt - startedAt) / 1000;
      metrics.modelTtft.observe({ model }, ttft);
      span.setAttribute('steerbot.model.time_to_first_token_ms', Math.round(ttft * 1000));
    },
    end(outcome, d = {}) {
      if (ended) return;
      ended = true;
      metrics.modelCallDuration.observe({ model, outcome }, (performance.now() - startedAt) / 1000);
      if (span.isRecording()) {
        span.setAttribute('steerbot.model.outcome', outcome);
        if (d.finishReason !== undefined) span.setAttribute('gen_ai.response.finish_reasons', [d.finishReason]);
        if (d.usage?.inputTokens !== undefined) span.setAttribute('gen_ai.usage.input_tokens', d.usage.inputTokens);
        if (d.usage?.outputTokens !== undefined) span.setAttribute('gen_ai.usage.output_tokens', d.usage.outputTokens);
        span.setAttribute('steerbot.usage.cached_input_tokens', d.usage?.cachedInputTokens ?? 0);
        if (outcome === 'error') failSpan(span, d.error);
      }
      span.end();
    },
  };
}

/** The active context, to parent the `tool.call` spans of tools that run inside a model call's stream on. */
export function activeContext(): Context {
  return context.active();
}

/**
 * Runs one tool call inside a `tool.call` span (child of `parent`): name,
 * duration, outcome (`error` when `call` throws or calls `failed`), and, when opted in,
 * its arguments and result. Counted in `steerbot_tool_calls_total` and
 * `steerbot_tool_call_duration_seconds`.
 */
export async function traceToolCall<T>(name: string, parent: Context, input: unknown, call: (failed: () => void) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(SPAN.toolCall, { kind: SpanKind.INTERNAL, attributes: { 'gen_ai.tool.name': name } }, parent);
  const startedAt = performance.now();
  let outcome: 'ok' | 'error' = 'error';
  let failed = false;
  try {
    const result = await context.with(trace.setSpan(parent, span), () => call(() => (failed = true)));
    outcome = failed ? 'error' : 'ok';
    if (span.isRecording()) {
      if (payloads) {
        span.setAttribute('steerbot.tool.arguments', payloadText(input));
        span.setAttribute('steerbot.tool.result', payloadText(result));
      }
      if (outcome === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: 'tool returned an error' });
    }
    return result;
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    const seconds = (performance.now() - startedAt) / 1000;
    metrics.toolCalls.inc({ tool: name, outcome });
    metrics.toolDuration.observe({ tool: name }, seconds);
    span.setAttribute('steerbot.tool.outcome', outcome);
    span.setAttribute('steerbot.tool.duration_ms', Math.round(seconds * 1000));
    span.end();
  }
}

function payloadText(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  const safe = redactSecrets(text);
  return safe.length > MAX_PAYLOAD_CHARS ? `${safe.slice(0, MAX_PAYLOAD_CHARS)}…` : safe;
}
