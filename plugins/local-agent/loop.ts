/**
 * The agent loop: one model call per step; after each step's whole tool
 * batch, pull steering and add it to the next request. Model and tool
 * failures are data: the loop returns a result, it does not throw.
 */
import { APICallError, streamText, type LanguageModel, type ModelMessage, type ToolSet } from 'ai';
import type { RunContext, RunResult } from '../../runner/plugin.js';
import { answerText, userMessage } from '../../runner/projection.js';
import { estimateTokens } from '../../runner/compaction/estimate.js';
import { isContextOverflowError } from '../../runner/compaction/overflow.js';
import type { SteeringMode } from '../../src/protocol/types.js';
import { traceModelCall } from '../../src/telemetry/agent-spans.js';

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
}

export const DEFAULT_MODEL_FAILURE_MESSAGE = 'Sorry, the model failed to answer. Please try again in a moment.';

/** Text sent when the loop gave up after `maxSteps` tool steps. */
export const STEP_LIMIT_MESSAGE = 'I stopped after too many steps without an answer. Please rephrase or narrow the request.';

/** A short, log- and user-safe description of a model failure. */
function failureReason(err: unknown): string {
  if (APICallError.isInstance(err)) return `model API error${err.statusCode ? ` ${err.statusCode}` : ''}`;
  if (err instanceof Error) return `model error: ${err.name}`;
  return 'model error';
}

/** Runs the loop for one RunContext. */
export async function runAgentLoop(ctx: RunContext, o: LoopOptions): Promise<RunResult> {
  const messages: ModelMessage[] = [...ctx.history];
  const maxSteps = o.maxSteps ?? 24;
  // Request tokens outside the messages, for the compaction estimate.
  const overhead = estimateTokens(o.system ?? '') + Object.entries(o.tools).reduce((n, [name, t]) => n + 50 + estimateTokens(name + (t.description ?? '')), 0);
  let overflowRetried = false;
  const modelName = typeof o.model === 'string' ? o.model : o.model.modelId;
  for (let step = 0; step < maxSteps; step++) {
    if (ctx.signal.aborted) return { outcome: 'completed' };
    const sent = [...messages];
    let text = '';
    let streamError: unknown;
    const call = traceModelCall(modelName, step);
    const result = streamText({
      model: o.model,
      tools: o.tools,
      messages,
      ...(o.system !== undefined && { system: o.system }),
      abortSignal: ctx.signal,
      maxRetries: o.maxRetries ?? 2,
      onError: ({ error }: { error: unknown }) => {
        streamError = error;
      },
    });
    try {
      for await (const part of result.fullStream) {
        call.part();
        if (part.type === 'text-delta') {
          text += part.text;
          if (o.streaming) ctx.delivery.delta(part.text);
        } else if (part.type === 'error') {
          streamError = part.error;
        }
      }
    } catch (err) {
      streamError ??= err;
    }

    if (ctx.signal.aborted || streamError !== undefined) call.end(ctx.signal.aborted ? 'aborted' : 'error', { error: streamError });
    if (ctx.signal.aborted) {
      // Cut off by a stop request: keep what was said, marked partial (the projection decides whether the model sees it).
      // On shutdown or a lost lease nobody interrupted: the next attempt redoes the step instead.
      if (text && ctx.stopRequested()) await ctx.recordStep({ messages: [{ role: 'assistant', content: [{ type: 'text', text }] }], partial: true, finishReason: 'aborted' });
      return { outcome: 'completed' };
    }
    if (streamError !== undefined && !overflowRetried && isContextOverflowError(streamError)) {
      // The provider says the prompt is too long: compact once (everything but this run) and retry the step.
      overflowRetried = true;
      const compacted = await ctx.compaction.onOverflow();
      if (compacted) {
        ctx.logger.warn('context overflow: compacted; retrying the step');
        messages.splice(0, messages.length, ...compacted);
        step--;
        continue;
      }
    }
    if (streamError !== undefined) {
      ctx.logger.error({ err: streamError }, 'model call failed');
      return { outcome: 'failed', reason: failureReason(streamError), notice: o.modelFailureMessage ?? DEFAULT_MODEL_FAILURE_MESSAGE };
    }

    const responseMessages = (await result.responseMessages) as ModelMessage[];
    const finishReason = await result.finishReason;
    const usage = await result.usage;
    call.end('ok', { finishReason, usage: { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.inputTokenDetails?.cacheReadTokens } });
    await ctx.recordStep({
      messages: responseMessages,
      finishReason,
      usage: {
        ...(usage.inputTokens !== undefined && { inputTokens: usage.inputTokens }),
        ...(usage.outputTokens !== undefined && { outputTokens: usage.outputTokens }),
        ...(usage.totalTokens !== undefined && { totalTokens: usage.totalTokens }),
        ...(usage.inputTokenDetails?.cacheReadTokens !== undefined && { cachedInputTokens: usage.inputTokenDetails.cacheReadTokens }),
      },
    });
    messages.push(...responseMessages);
    overflowRetried = false;
    if (usage.inputTokens !== undefined) ctx.compaction.observe(sent, usage.inputTokens, overhead);

    if (finishReason !== 'tool-calls') {
      // Exactly the recorded step's text: an attempt that takes the run over after a crash delivers it from the record.
      const answer = answerText(responseMessages) || text;
      if (answer.trim()) await ctx.delivery.message(answer);
      // Anything that arrived during this last step is handed back by `finish`.
      return { outcome: 'completed' };
    }
    // Turn boundary: the whole tool batch is done; steering joins the next request.
    const steered = await ctx.steering.pull(o.steeringMode ?? 'all');
    // Rendered exactly as the projection renders them, so a rebuilt prompt is the same prompt.
    for (const m of steered) messages.push(userMessage(m, false));
    if (steered.length) ctx.logger.info({ seqs: steered.map((m) => m.seq) }, 'steering injected');
    // Pressure check (or a pending /compact): the record holds everything in `messages`, so a compacted prompt replaces it.
    const compacted = await ctx.compaction.atBoundary(messages);
    if (compacted) messages.splice(0, messages.length, ...compacted);
  }
  return { outcome: 'failed', reason: 'step limit reached', notice: STEP_LIMIT_MESSAGE };
}
