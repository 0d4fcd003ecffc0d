/**
 * The agent loop: one model call per step; after each step's whole tool
 * batch, pull steering and add it to the next request. A step's tool calls
 * are recorded before any runs (plugins/local-agent/tool-batch.ts), so an
 * attempt taking the run over finishes that step instead of asking the model
 * again. Model and tool failures are data: the loop returns a result, it
 * does not throw.
 */

import { APICallError, type LanguageModel, type ModelMessage, streamText, type ToolSet, type TranscriptionModel } from 'ai';
import {
  answerText,
  DEFAULTS,
  ESTIMATE_MAX_OVERCOUNT,
  estimateMessages,
  estimateTokens,
  isContextOverflowError,
  type RunContext,
  type RunResult,
  type SteeringMode,
  type StepRecord,
  traceModelCall,
  userMessage,
} from 'steerbot/runner';
import type { AttachmentParts } from './attachments.js';
import { cachePlan } from './caching.js';
import {
  CONTEXT_OVERFLOW_MESSAGE,
  DEFAULT_MODEL_FAILURE_MESSAGE,
  EMPTY_ANSWER_MESSAGE,
  RUN_REASON,
  STEP_LIMIT_MESSAGE,
  STREAM_TIMEOUT_MESSAGE,
} from './outcomes.js';
import { declaredTools, openToolCalls, runToolCalls } from './tool-batch.js';
import { StreamWatchdog } from './watchdog.js';

export { DEFAULT_MODEL_FAILURE_MESSAGE } from './outcomes.js';

/** Settings of one loop. */
export interface LoopOptions {
  model: LanguageModel;
  tools: ToolSet;
  /** System prompt. */
  system?: string;
  /** Steering taken per boundary. Default `all`. */
  steeringMode?: SteeringMode;
  /** Most model steps in one invocation (guards against tool loops). Default 24. */
  maxSteps?: number;
  /** Provider retries of a failed call before the run fails. Default 2. */
  maxRetries?: number;
  /** Stream deltas to the delivery sink. Default false. */
  streaming?: boolean;
  /** Text sent when the model fails (the runtime sends it, with any steered message left unanswered). */
  modelFailureMessage?: string;
  /** Puts attachments of the messages a run answers into its requests as image / file parts. Default: placeholders only. */
  attachments?: AttachmentParts;
  /** Transcribes voice notes and audio files of the messages a run answers. Default: none (placeholders). */
  transcriber?: TranscriptionModel;
  /** A model stream silent this long (no part, response headers included; tool execution excluded) is aborted and retried once, in ms. 0: never. Default 120 000. */
  streamIdleTimeoutMs?: number;
}

/** Default of `streamIdleTimeoutMs`: generous, since reasoning models may think for a while before their first token. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 120_000;

/** A short, log- and user-safe description of a model failure. */
function failureReason(err: unknown): string {
  if (APICallError.isInstance(err)) return `model API error${err.statusCode ? ` ${err.statusCode}` : ''}`;
  if (err instanceof Error) return `model error: ${err.name}`;
  return 'model error';
}

/** Runs the loop for one RunContext. */
export async function runAgentLoop(ctx: RunContext, o: LoopOptions): Promise<RunResult> {
  const messages: ModelMessage[] = [...ctx.history];
  const maxSteps = o.maxSteps ?? DEFAULTS.agent.maxSteps;
  const idleMs = o.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
  // Request tokens outside the messages, for the compaction estimate.
  const overhead = estimateTokens(o.system ?? '') + Object.entries(o.tools).reduce((n, [name, t]) => n + 50 + estimateTokens(name + (t.description ?? '')), 0);
  let overflowRetried = false;
  let idleRetried = false;
  // Deltas already shown for this step when its call was retried: the retry is not streamed again (its final text replaces them).
  let streamedPartial = false;
  const modelName = typeof o.model === 'string' ? o.model : o.model.modelId;
  // Provider prompt caching: the same system, tools and cache key for every request of the conversation.
  const cache = cachePlan(o.model, ctx.conversationId, o.system, o.tools);
  // The messages this invocation answers: their attachments go to the model as parts (again after a compaction rebuilt the prompt).
  const answering = [...ctx.inputs];
  const attach = async (entries: typeof answering): Promise<RunResult | undefined> => {
    const refused = await o.attachments?.expand(ctx, messages, entries, o.transcriber);
    return refused ? { outcome: 'failed', reason: RUN_REASON.attachmentUnsupported, notice: refused } : undefined;
  };
  const refused = await attach(answering);
  if (refused) return refused;
  /**
   * Runs a step's open tool calls (recorded first when the model just made
   * them: `fresh`), records the step, then delivers its answer or works at
   * the turn boundary. Returns the invocation's result when the step ends it.
   */
  const finishStep = async (response: StepRecord, text: string, fresh: boolean): Promise<RunResult | undefined> => {
    let stepMessages = response.messages;
    if (openToolCalls(stepMessages).length > 0) {
      // Recorded before any call runs: a takeover finishes this step from the record, the model does not decide it again.
      if (fresh) await ctx.recordToolCalls?.(response);
      stepMessages = await runToolCalls(o.tools, stepMessages, messages, ctx.signal);
      // Stopped (or shut down) during the batch: as a stop during the model call.
      if (ctx.signal.aborted) return cutOff(ctx, text);
    }
    await ctx.recordStep({ ...response, messages: stepMessages });
    messages.push(...stepMessages);

    if (response.finishReason !== 'tool-calls') {
      // Exactly the recorded step's text: an attempt that takes the run over after a crash delivers it from the record.
      const answer = answerText(stepMessages) || text;
      if (answer.trim()) {
        await ctx.delivery.message(answer);
        // Anything that arrived during this last step is handed back by `finish`.
        return { outcome: 'completed' };
      }
      // Never silence: the user hears that nothing came back, and the run says why (the step is recorded as it was).
      ctx.logger.warn({ finishReason: response.finishReason }, 'the model returned an empty answer');
      return { outcome: 'completed', reason: `${RUN_REASON.emptyAnswer} (finish: ${response.finishReason})`, notice: EMPTY_ANSWER_MESSAGE };
    }
    // Turn boundary: the whole tool batch is done; steering joins the next request.
    const steered = await ctx.steering.pull(o.steeringMode ?? DEFAULTS.agent.steeringMode);
    // Rendered exactly as the projection renders them, so a rebuilt prompt is the same prompt.
    for (const m of steered) messages.push(userMessage(m, false));
    answering.push(...steered);
    const refusedSteered = await attach(steered);
    if (refusedSteered) return refusedSteered;
    if (steered.length) ctx.logger.info({ seqs: steered.map((m) => m.seq) }, 'steering injected');
    // Pressure check (or a pending /compact): the record holds everything in `messages`, so a compacted prompt replaces it.
    const compacted = await ctx.compaction.atBoundary(messages);
    if (compacted) {
      messages.splice(0, messages.length, ...compacted);
      await attach(answering);
    }
    return undefined;
  };
  if (ctx.unfinishedStep) {
    // An earlier attempt died in this step after recording its tool calls: the model decided them already.
    ctx.logger.info('finishing the tool-call step an earlier attempt recorded, without calling the model');
    const ended = await finishStep(ctx.unfinishedStep, answerText(ctx.unfinishedStep.messages), false);
    if (ended) return ended;
  }
  for (let step = 0; step < maxSteps; step++) {
    if (ctx.signal.aborted) return { outcome: 'completed' };
    const fits = await fitContext(ctx, messages, overhead, overflowRetried);
    if (fits === 'overflow') {
      ctx.logger.warn({ contextWindow: ctx.model.contextWindow }, 'the prompt exceeds the context window even after compaction; not calling the model');
      return { outcome: 'failed', reason: RUN_REASON.contextOverflow, notice: CONTEXT_OVERFLOW_MESSAGE };
    }
    if (fits === 'compacted') {
      overflowRetried = true;
      await attach(answering);
    }
    const sent = [...messages];
    let text = '';
    let streamError: unknown;
    const call = traceModelCall(modelName, step);
    const watchdog = new StreamWatchdog(idleMs, ctx.signal);
    const result = streamText({
      model: o.model,
      tools: declaredTools(cache.tools()),
      messages: cache.messages(messages),
      ...(cache.system !== undefined && { system: cache.system }),
      ...(cache.providerOptions && { providerOptions: cache.providerOptions }),
      abortSignal: watchdog.signal,
      maxRetries: o.maxRetries ?? 2,
      onError: ({ error }: { error: unknown }) => {
        streamError = error;
      },
    });
    try {
      for await (const part of result.fullStream) {
        watchdog.part(part as { type: string; toolCallId?: string });
        call.part();
        if (part.type === 'text-delta') {
          text += part.text;
          if (o.streaming && !streamedPartial) ctx.delivery.delta(part.text);
        } else if (part.type === 'error') {
          streamError = part.error;
        }
      }
    } catch (err) {
      streamError ??= err;
    } finally {
      watchdog.stop();
    }

    if (ctx.signal.aborted || streamError !== undefined || watchdog.fired)
      call.end(ctx.signal.aborted ? 'aborted' : 'error', { error: watchdog.fired ? watchdog.signal.reason : streamError });
    if (ctx.signal.aborted) {
      // Cut off by a stop request: keep what was said, marked partial (the projection decides whether the model sees it).
      return cutOff(ctx, text);
    }
    if (watchdog.fired) {
      // A silent provider: once is a hiccup worth one more try; twice, the user hears about it rather than waiting for /stop.
      if (!idleRetried) {
        idleRetried = true;
        streamedPartial ||= o.streaming === true && text !== '';
        ctx.logger.warn({ idleMs, step }, 'model stream silent; retrying the call once');
        step--;
        continue;
      }
      ctx.logger.error({ idleMs, step }, 'model stream silent again; giving up');
      return { outcome: 'failed', reason: RUN_REASON.timeout, notice: STREAM_TIMEOUT_MESSAGE };
    }
    if (streamError !== undefined && !overflowRetried && isContextOverflowError(streamError)) {
      // The provider says the prompt is too long: compact once (everything but this run) and retry the step.
      overflowRetried = true;
      const compacted = await ctx.compaction.onOverflow();
      if (compacted) {
        ctx.logger.warn('context overflow: compacted; retrying the step');
        messages.splice(0, messages.length, ...compacted);
        await attach(answering);
        step--;
        continue;
      }
    }
    if (streamError !== undefined && isContextOverflowError(streamError)) {
      // Refused again after the one compaction (or nothing could be compacted): the same typed end as the pre-call check, not a bare 400.
      ctx.logger.error({ err: streamError }, 'context overflow persists after compaction; giving up');
      return { outcome: 'failed', reason: RUN_REASON.contextOverflow, notice: CONTEXT_OVERFLOW_MESSAGE };
    }
    if (streamError !== undefined) {
      ctx.logger.error({ err: streamError }, 'model call failed');
      return { outcome: 'failed', reason: failureReason(streamError), notice: o.modelFailureMessage ?? DEFAULT_MODEL_FAILURE_MESSAGE };
    }

    const responseMessages = (await result.responseMessages) as ModelMessage[];
    const finishReason = await result.finishReason;
    const usage = await result.usage;
    call.end('ok', {
      finishReason,
      usage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.inputTokenDetails?.cacheReadTokens },
    });
    overflowRetried = false;
    idleRetried = false;
    streamedPartial = false;
    if (usage.inputTokens !== undefined) ctx.compaction.observe(sent, usage.inputTokens, overhead);
    const ended = await finishStep(
      {
        messages: responseMessages,
        finishReason,
        usage: {
          ...(usage.inputTokens !== undefined && { inputTokens: usage.inputTokens }),
          ...(usage.outputTokens !== undefined && { outputTokens: usage.outputTokens }),
          ...(usage.totalTokens !== undefined && { totalTokens: usage.totalTokens }),
          ...(usage.inputTokenDetails?.cacheReadTokens !== undefined && { cachedInputTokens: usage.inputTokenDetails.cacheReadTokens }),
        },
      },
      text,
      true,
    );
    if (ended) return ended;
  }
  return { outcome: 'failed', reason: RUN_REASON.stepLimit, notice: STEP_LIMIT_MESSAGE };
}

/**
 * Ends the invocation cut off by a stop request: keeps what was said, marked
 * partial (the projection decides whether the model sees it). On shutdown or
 * a lost lease nobody interrupted: the next attempt redoes the step instead.
 */
async function cutOff(ctx: RunContext, text: string): Promise<RunResult> {
  if (text && ctx.stopRequested())
    await ctx.recordStep({ messages: [{ role: 'assistant', content: [{ type: 'text', text }] }], partial: true, finishReason: 'aborted' });
  return { outcome: 'completed' };
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
  const fits = () => (estimateMessages(messages) + overhead) / ESTIMATE_MAX_OVERCOUNT <= ctx.model.contextWindow;
  if (fits()) return 'fits';
  if (compactedAlready) return 'overflow';
  const compacted = await ctx.compaction.onOverflow();
  if (!compacted) return 'overflow';
  messages.splice(0, messages.length, ...compacted);
  return fits() ? 'compacted' : 'overflow';
}
