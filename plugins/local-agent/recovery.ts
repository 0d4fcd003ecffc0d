/**
 * One model step with its recovery: the prompt is checked against the
 * context window before the call, and a call that did not answer is looked
 * at once. An overflow (before the call, or the provider's error) compacts
 * once and calls again; a call that failed in a way another model may not
 * (rate limit, overload, 5xx, network, a silent stream) asks the next
 * fallback model, when there is one; else a silent stream is retried once.
 * Each budget is one step's: a step that answers leaves the next step a fresh one.
 */
import { APICallError, type ModelMessage, RetryError } from 'ai';
import { compaction, type RunContext, type RunResult, type StepRecord } from 'steerbot/runner';
import type { LoopState } from './loop-state.js';
import { callModel, type ModelOutcome } from './model-call.js';
import { CONTEXT_OVERFLOW_MESSAGE, DEFAULT_MODEL_FAILURE_MESSAGE, RUN_REASON, STREAM_TIMEOUT_MESSAGE } from './outcomes.js';
import { cutOff } from './turn-boundary.js';

/** A step's model call as the loop sees it: a step to finish, or the invocation's end. */
export type StepOutcome = { kind: 'answered'; step: StepRecord; text: string } | { kind: 'ended'; result: RunResult };

/** Calls the model for step `step`, recovering at most once from an overflow and once from a silent stream. */
export async function modelStep(state: LoopState, step: number): Promise<StepOutcome> {
  const recovery = new StepRecovery(state, step);
  for (;;) {
    const refused = await recovery.fitContext();
    if (refused) return { kind: 'ended', result: refused };
    const outcome = await callModel(state, step, recovery.quiet);
    if (outcome.kind === 'answered') return outcome;
    const next = await recovery.recover(outcome);
    if (next !== 'retry') return { kind: 'ended', result: next };
  }
}

/** The recovery budget of one step and the decisions spent from it. */
class StepRecovery {
  /** The step's one compaction (before a call or after the provider's overflow) is spent. */
  private compacted = false;
  /** The step's one retry after a silent stream is spent. */
  private stallRetried = false;
  /** Deltas already shown for this step when its call was retried: the retry is not streamed again (its final text replaces them). */
  quiet = false;

  constructor(
    private readonly state: LoopState,
    private readonly step: number,
  ) {}

  /** Before a call: undefined when the prompt fits (compacting once if needed), else the run's end. */
  async fitContext(): Promise<RunResult | undefined> {
    const { ctx } = this.state;
    const fits = await fitContext(ctx, this.state.messages, this.state.overhead, this.compacted);
    if (fits === 'overflow') {
      ctx.logger.warn({ contextWindow: ctx.agent.model.contextWindow }, 'the prompt exceeds the context window even after compaction; not calling the model');
      return overflowed();
    }
    if (fits === 'compacted') {
      this.compacted = true;
      await this.state.reattach();
    }
    return undefined;
  }

  /** After a call that did not answer: `retry`, or the run's end. */
  async recover(outcome: Exclude<ModelOutcome, { kind: 'answered' }>): Promise<'retry' | RunResult> {
    const { ctx, o } = this.state;
    // Cut off by a stop request: keep what was said, marked partial (the projection decides whether the model sees it).
    if (outcome.kind === 'aborted') return cutOff(ctx, outcome.text, outcome.usage);
    // A silent or failed call records no step, but its request may be billed: charged before a retry or a fallback.
    if (outcome.usage) await ctx.record.spent?.(outcome.usage);
    if (outcome.kind === 'stalled') return this.afterStall(outcome.text);
    if (compaction.isContextOverflowError(outcome.error)) {
      if (!this.compacted && (await this.compactAfterOverflow())) return 'retry';
      // Refused again after the one compaction (or nothing could be compacted): the same typed end as the pre-call check, not a bare 400.
      ctx.logger.error({ err: outcome.error }, 'context overflow persists after compaction; giving up');
      return overflowed();
    }
    if (isTransient(outcome.error) && this.failOver(outcome.text, outcome.error)) return 'retry';
    ctx.logger.error({ err: outcome.error }, 'model call failed');
    // A request the provider refuses as invalid (a 4xx it does not call retryable) would be refused again by a follow-up run.
    const refused = APICallError.isInstance(outcome.error) && !outcome.error.isRetryable;
    return {
      outcome: 'failed',
      reason: failureReason(outcome.error),
      notice: o.modelFailureMessage ?? DEFAULT_MODEL_FAILURE_MESSAGE,
      ...(refused && { final: true }),
    };
  }

  /** A silent provider: once is a hiccup worth one more try; twice, the user hears about it rather than waiting for /stop. */
  private afterStall(text: string): 'retry' | RunResult {
    const { ctx, o, idleMs } = this.state;
    if (this.failOver(text, new Error(`model stream silent for ${idleMs} ms`))) return 'retry';
    if (this.stallRetried) {
      ctx.logger.error({ idleMs, step: this.step }, 'model stream silent again; giving up');
      return { outcome: 'failed', reason: RUN_REASON.timeout, notice: STREAM_TIMEOUT_MESSAGE };
    }
    this.stallRetried = true;
    this.quiet ||= o.streaming === true && text !== '';
    ctx.logger.warn({ idleMs, step: this.step }, 'model stream silent; retrying the call once');
    return 'retry';
  }

  /** Asks the same step of the next fallback model, when there is one; what the failed call streamed is not streamed again. */
  private failOver(text: string, err: unknown): boolean {
    const { ctx, o } = this.state;
    const from = this.state.modelName;
    if (!this.state.failOver()) return false;
    this.quiet ||= o.streaming === true && text !== '';
    ctx.logger.warn({ err, from, to: this.state.modelName, step: this.step }, 'model call failed; asking the next fallback model');
    return true;
  }

  /** The provider says the prompt is too long: compact once (everything but this run). True when there is a new prompt to retry with. */
  private async compactAfterOverflow(): Promise<boolean> {
    const { ctx } = this.state;
    this.compacted = true;
    const compacted = await ctx.compaction.onOverflow();
    if (!compacted) return false;
    ctx.logger.warn('context overflow: compacted; retrying the step');
    this.state.replace(compacted);
    await this.state.reattach();
    return true;
  }
}

/** The end of a run whose prompt does not fit the model, even compacted: final, a follow-up run's prompt would not fit either. */
function overflowed(): RunResult {
  return { outcome: 'failed', reason: RUN_REASON.contextOverflow, notice: CONTEXT_OVERFLOW_MESSAGE, final: true };
}

/** A short, log- and user-safe description of a model failure. */
function failureReason(err: unknown): string {
  if (APICallError.isInstance(err)) return `model API error${err.statusCode ? ` ${err.statusCode}` : ''}`;
  if (err instanceof Error) return `model error: ${err.name}`;
  return 'model error';
}

/**
 * Checks, before a call, that the request can fit the model's whole context
 * window (the provider would refuse it with a 400). When it cannot, compacts
 * once (like a provider overflow) and checks again; `overflow` when it still
 * cannot. The estimate leans high, so it is divided by its largest overcount
 * and held against the full window (not minus the output reserve): only a
 * request clearly too long is refused here; a closer one goes to the
 * provider, whose own overflow error compacts once and retries.
 */
async function fitContext(ctx: RunContext, messages: ModelMessage[], overhead: number, compactedAlready: boolean): Promise<'fits' | 'compacted' | 'overflow'> {
  const fits = () => (compaction.estimateMessages(messages) + overhead) / compaction.ESTIMATE_MAX_OVERCOUNT <= ctx.agent.model.contextWindow;
  if (fits()) return 'fits';
  if (compactedAlready) return 'overflow';
  const compacted = await ctx.compaction.onOverflow();
  if (!compacted) return 'overflow';
  messages.splice(0, messages.length, ...compacted);
  return fits() ? 'compacted' : 'overflow';
}

// Network failures under the provider's fetch: the endpoint is down or unreachable, another one may not be.
const NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * A failure another model may not have: a rate limit, an overload, a 5xx or
 * a timeout (what the provider calls retryable), or the network. A request
 * the provider refuses as invalid would be refused by any model: not one.
 */
export function isTransient(err: unknown): boolean {
  const e = RetryError.isInstance(err) ? err.lastError : err;
  if (APICallError.isInstance(e)) return e.isRetryable;
  const code = (e as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}
