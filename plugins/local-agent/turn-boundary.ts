/**
 * The work after a model step: its tool batch runs (recorded first when the
 * model just made the calls), the step is recorded, and then either its
 * answer is delivered (the invocation ends) or, at the turn boundary,
 * steering is pulled into the next request and compaction gets its chance.
 */
import type { ModelMessage } from 'ai';
import { silenceAllowed } from 'steerbot/plugin';
import { answerText, DEFAULTS, type RunContext, type RunResult, type StepRecord, userMessage } from 'steerbot/runner';
import type { LoopState } from './loop-state.js';
import { EMPTY_ANSWER_MESSAGE, RUN_REASON } from './outcomes.js';
import { openToolCalls, runToolCalls } from './tool-batch.js';
import { speakAnswer, speaks } from './voice-replies.js';

/**
 * Runs a step's open tool calls (recorded first when the model just made
 * them: `fresh`), records the step, then delivers its answer or works at
 * the turn boundary. Returns the invocation's result when the step ends it.
 */
export async function finishStep(state: LoopState, response: StepRecord, text: string, fresh: boolean): Promise<RunResult | undefined> {
  const { ctx } = state;
  const stepMessages = await runBatch(state, response, fresh);
  // Stopped (or shut down) during the batch: as a stop during the model call, charged the step's reported usage.
  if (!stepMessages) return cutOff(ctx, text, response.usage);
  await ctx.record.step({ ...response, messages: stepMessages, model: state.modelName, ...(state.model !== state.o.model && { fallback: true }) });
  state.messages.push(...stepMessages);
  if (response.finishReason !== 'tool-calls') return deliverAnswer(state, stepMessages, text, response.finishReason);
  return atBoundary(state);
}

/**
 * Ends the invocation cut off by a stop request: keeps what was said, marked
 * partial (the projection decides whether the model sees it). On shutdown or
 * a lost lease nobody interrupted: the next attempt redoes the step instead.
 * `usage`: what the cut call spent (reported, or estimated); it is charged
 * whether or not a step is kept (a stop before the first word, a shutdown, a
 * lost lease), since the provider bills the prompt all the same.
 */
export async function cutOff(ctx: RunContext, text: string, usage?: StepRecord['usage']): Promise<RunResult> {
  if (text && ctx.stop.requested())
    await ctx.record.step({
      messages: [{ role: 'assistant', content: [{ type: 'text', text }] }],
      partial: true,
      finishReason: 'aborted',
      ...(usage && { usage }),
    });
  else if (usage) await ctx.record.spent?.(usage);
  return { outcome: 'completed' };
}

/** The step's messages with its tool results; undefined when the run was stopped during the batch. */
async function runBatch(state: LoopState, response: StepRecord, fresh: boolean): Promise<ModelMessage[] | undefined> {
  const { ctx } = state;
  if (openToolCalls(response.messages).length === 0) return response.messages;
  // Recorded before any call runs: a takeover finishes this step from the record, the model does not decide it again.
  if (fresh) await ctx.record.toolCalls?.(response);
  const stepMessages = await runToolCalls(state.o.tools, response.messages, state.messages, ctx.stop.signal);
  return ctx.stop.signal.aborted ? undefined : stepMessages;
}

/**
 * A step that is not a tool step ends the invocation: its answer goes out, or
 * the user hears that nothing came back, unless the run answers only
 * heartbeats, which may say nothing (a silent turn).
 */
async function deliverAnswer(state: LoopState, stepMessages: ModelMessage[], text: string, finishReason: StepRecord['finishReason']): Promise<RunResult> {
  const { ctx } = state;
  // Exactly the recorded step's text: an attempt that takes the run over after a crash delivers it from the record.
  const answer = answerText(stepMessages) || text;
  if (answer.trim()) {
    await ctx.delivery.message(answer);
    if (state.o.voice && speaks(ctx, state.o.voice, state.answering)) await speakAnswer(ctx, state.o.voice, answer, state.answering.at(-1)?.seq ?? 0);
    // Anything that arrived during this last step is handed back by `finish`.
    return { outcome: 'completed' };
  }
  if (silenceAllowed(state.answering)) {
    ctx.logger.info({ seqs: state.answering.map((m) => m.seq) }, 'heartbeat turn ended without a message');
    return { outcome: 'completed', reason: RUN_REASON.silent };
  }
  // Never silence a user: they hear that nothing came back, and the run says why (the step is recorded as it was).
  ctx.logger.warn({ finishReason }, 'the model returned an empty answer');
  return { outcome: 'completed', reason: `${RUN_REASON.emptyAnswer} (finish: ${finishReason})`, notice: EMPTY_ANSWER_MESSAGE };
}

/** Turn boundary: the whole tool batch is done; steering joins the next request, and the prompt may be compacted. */
async function atBoundary(state: LoopState): Promise<RunResult | undefined> {
  const { ctx, o } = state;
  const steered = await ctx.steering.pull(o.steeringMode ?? DEFAULTS.agent.steeringMode);
  // Rendered exactly as the projection renders them, so a rebuilt prompt is the same prompt.
  for (const m of steered) state.messages.push(userMessage(m));
  state.answering.push(...steered);
  const refused = await state.attach(steered);
  if (refused) return refused;
  if (steered.length) ctx.logger.info({ seqs: steered.map((m) => m.seq) }, 'steering injected');
  // Pressure check (or a pending /compact): the record holds everything in `messages`, so a compacted prompt replaces it.
  const compacted = await ctx.compaction.atBoundary(state.messages);
  if (compacted) {
    state.replace(compacted);
    await state.reattach();
  }
  return undefined;
}
