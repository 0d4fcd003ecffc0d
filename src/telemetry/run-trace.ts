/**
 * The `run` span and run metrics of one execution (acquire to end). The
 * span continues the trace of the message that created the run (its record
 * entry's `trace`) and links to the traces of the run's other inputs; its
 * children (`model.call`, `tool.call`, `steering.pull`, `compaction`,
 * `delivery`) are made wherever that work happens, under the context
 * `begin` makes active for the rest of the execution.
 */
import type { MessageReceived, SeqEntry } from '../record/entries.js';
import { metrics } from './metrics.js';
import { contextFromTraceparent, enterContext, failSpan, inSpan, type Link, linkTo, SPAN, type Span, SpanKind, trace, tracer } from './tracing.js';

/** What identifies an execution. */
export interface RunTraceInfo {
  conversationId: string;
  runId: string;
  /** 1 on the first attempt; more after a takeover. */
  attempt: number;
  /** Fencing token of this attempt. */
  token: number;
  /** What the run was created for (`ingest`, `finish`, `compact`, …), when known. */
  cause?: string;
}

/** Token usage of one model step, as the record keeps it. */
export interface StepUsage {
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  cachedInputTokens?: number | undefined;
}

/** How an execution ended, as the executor reports it. */
export type RunEnd = { kind: 'finished'; outcome: string } | { kind: 'lost' } | { kind: 'aborted' };

/** Telemetry of one execution. Every method is safe to call in any order; none throws. */
export class RunTrace {
  private span: Span | undefined;
  private readonly startedAt = Date.now();
  private began = false;
  private tokensIn = 0;
  private tokensOut = 0;
  private tokensCached = 0;

  /** `model`: the configured model name, the label of token counts. */
  constructor(private readonly model: string) {}

  /**
   * Starts the `run` span (parent: the first input's trace) and makes it the
   * active context for the rest of the calling async function. Call it after
   * the execution's first `await` (see `enterContext`).
   */
  begin(info: RunTraceInfo, inputs: ReadonlyArray<SeqEntry<MessageReceived>>): void {
    if (this.began) return;
    this.began = true;
    metrics.runsStarted.inc({ takeover: info.attempt > 1 ? '1' : '0' });
    if (info.attempt > 1) metrics.leaseTakeovers.inc();
    metrics.runsActive.inc();
    const parentEntry = inputs.find((m) => m.trace !== undefined);
    const links = inputs
      .filter((m) => m !== parentEntry)
      .map((m) => linkTo(m.trace, { 'steerbot.seq': m.seq }))
      .filter((l): l is Link => l !== undefined);
    this.span = tracer().startSpan(
      SPAN.run,
      {
        kind: SpanKind.CONSUMER,
        startTime: this.startedAt,
        links,
        attributes: {
          'steerbot.run_id': info.runId,
          'steerbot.conversation_id': info.conversationId,
          'steerbot.attempt': info.attempt,
          'steerbot.fencing_token': info.token,
          'steerbot.inputs': inputs.map((m) => m.seq),
          ...(info.cause !== undefined && { 'steerbot.run.cause': info.cause }),
        },
      },
      contextFromTraceparent(parentEntry?.trace),
    );
    enterContext(trace.setSpan(contextFromTraceparent(parentEntry?.trace), this.span));
  }

  /** Adds a recorded step's provider usage to the run's totals and to `steerbot_model_tokens_total`. */
  usage(u: StepUsage | undefined): void {
    if (!u) return;
    const model = this.model;
    if (u.inputTokens) {
      this.tokensIn += u.inputTokens;
      metrics.modelTokens.inc({ model, kind: 'input' }, u.inputTokens);
    }
    if (u.outputTokens) {
      this.tokensOut += u.outputTokens;
      metrics.modelTokens.inc({ model, kind: 'output' }, u.outputTokens);
    }
    if (u.cachedInputTokens) {
      this.tokensCached += u.cachedInputTokens;
      metrics.modelTokens.inc({ model, kind: 'cached' }, u.cachedInputTokens);
    }
  }

  /** Ends the span and counts the run; returns `result`. */
  ended<R extends RunEnd>(result: R): R {
    this.finish(result.kind === 'finished' ? result.outcome : result.kind);
    return result;
  }

  /** Ends the span as failed (the execution threw). */
  threw(err: unknown): void {
    if (this.span) failSpan(this.span, err);
    this.finish('error');
  }

  private finish(outcome: string): void {
    if (!this.began) return;
    this.began = false;
    metrics.runsActive.dec();
    metrics.runsEnded.inc({ outcome });
    metrics.runDuration.observe({ outcome }, (Date.now() - this.startedAt) / 1000);
    const span = this.span;
    if (!span) return;
    this.span = undefined;
    span.setAttributes({
      'steerbot.run.outcome': outcome,
      'gen_ai.usage.input_tokens': this.tokensIn,
      'gen_ai.usage.output_tokens': this.tokensOut,
      'steerbot.usage.cached_input_tokens': this.tokensCached,
    });
    span.end();
  }
}

/**
 * A `steering.pull` span around one pull: how many messages, their seqs, the
 * longest delay from ingest to injection, and links to their traces. Also
 * feeds `steerbot_steering_injected_total` and `steerbot_steering_delay_seconds`.
 */
export function tracePull<T extends { messages: ReadonlyArray<SeqEntry> }>(pull: () => Promise<T>, now: () => number = Date.now): Promise<T> {
  return inSpan(SPAN.steeringPull, {}, async (span) => {
    const pulled = await pull();
    const messages = pulled.messages.filter((m): m is SeqEntry<MessageReceived> => m.kind === 'message.received');
    const at = now();
    let maxDelayMs = 0;
    for (const m of messages) {
      const delay = Math.max(0, at - m.at);
      maxDelayMs = Math.max(maxDelayMs, delay);
      metrics.steeringDelay.observe(delay / 1000);
      const link = linkTo(m.trace, { 'steerbot.seq': m.seq });
      if (link) span.addLink(link);
    }
    if (messages.length > 0) metrics.steeringInjected.inc(messages.length);
    span.setAttributes({
      'steerbot.steering.count': messages.length,
      'steerbot.steering.seqs': messages.map((m) => m.seq),
      'steerbot.steering.max_delay_ms': maxDelayMs,
    });
    return pulled;
  });
}

/** What one compaction attempt did (runner/compaction/hooks.ts maps its result to this). */
export interface CompactionFacts {
  /** compacted (effective), ineffective (still over the threshold), skipped, conflict (another checkpoint won), failed. */
  outcome: 'compacted' | 'ineffective' | 'skipped' | 'conflict' | 'failed';
  /** Why it was skipped (`breaker-open`, `nothing-to-compact`). */
  reason?: string;
  tokensBefore?: number;
  tokensAfter?: number;
  /** `llm` or `fallback`. */
  summarizer?: string;
  /** The conversation's circuit breaker after this attempt. */
  breakerOpen?: boolean;
  /** This attempt opened the breaker. */
  breakerOpened?: boolean;
  error?: unknown;
}

/** Records a `compaction` span (child of the active run span) from `startedAtMs` to now, and counts it. */
export function traceCompaction(trigger: string, startedAtMs: number, f: CompactionFacts): void {
  metrics.compactions.inc({ trigger, outcome: f.outcome });
  if (f.breakerOpened) metrics.breakerOpened.inc();
  const span = tracer().startSpan(SPAN.compaction, {
    startTime: startedAtMs,
    attributes: {
      'steerbot.compaction.trigger': trigger,
      'steerbot.compaction.outcome': f.outcome,
      ...(f.reason !== undefined && { 'steerbot.compaction.reason': f.reason }),
      ...(f.tokensBefore !== undefined && { 'steerbot.compaction.tokens_before': f.tokensBefore }),
      ...(f.tokensAfter !== undefined && { 'steerbot.compaction.tokens_after': f.tokensAfter }),
      ...(f.summarizer !== undefined && { 'steerbot.compaction.summarizer': f.summarizer }),
      ...(f.breakerOpen !== undefined && { 'steerbot.compaction.breaker_open': f.breakerOpen }),
    },
  });
  if (f.outcome === 'failed') failSpan(span, f.error);
  span.end();
}
