/**
 * The agent loop: one model call per step; after each step's whole tool
 * batch, pull steering and add it to the next request. It reads as three
 * steps, each in its own file: the model call, which returns an outcome
 * (model-call.ts); the recovery of a call that did not answer (overflow:
 * compact once; silent stream: retry once; recovery.ts); and the work at
 * the turn boundary (tool batch, steering pull, compaction;
 * turn-boundary.ts). A step's tool calls are recorded before any runs
 * (tool-batch.ts), so an attempt taking the run over finishes that step
 * instead of asking the model again. Model and tool failures are data: the
 * loop returns a result, it does not throw.
 */

import { answerText, DEFAULTS, type RunContext, type RunResult } from 'steerbot/runner';
import { type LoopOptions, LoopState } from './loop-state.js';
import { RUN_REASON, STEP_LIMIT_MESSAGE } from './outcomes.js';
import { modelStep } from './recovery.js';
import { finishStep } from './turn-boundary.js';

export { DEFAULT_STREAM_IDLE_TIMEOUT_MS } from './loop-state.js';
export { DEFAULT_MODEL_FAILURE_MESSAGE } from './outcomes.js';

/** Runs the loop for one RunContext. */
export async function runAgentLoop(ctx: RunContext, o: LoopOptions): Promise<RunResult> {
  const state = new LoopState(ctx, o);
  const refused = await state.attach(state.answering);
  if (refused) return refused;
  if (ctx.record.unfinished) {
    // An earlier attempt died in this step after recording its tool calls: the model decided them already.
    ctx.logger.info('finishing the tool-call step an earlier attempt recorded, without calling the model');
    const ended = await finishStep(state, ctx.record.unfinished, answerText(ctx.record.unfinished.messages), false);
    if (ended) return ended;
  }
  const maxSteps = o.maxSteps ?? DEFAULTS.agent.maxSteps;
  for (let step = 0; step < maxSteps; step++) {
    if (ctx.stop.signal.aborted) return { outcome: 'completed' };
    // The runtime checked the budgets before the first step; each further step is checked here.
    const spent = step > 0 ? await ctx.features.spendingCheck?.() : undefined;
    if (spent) return spent;
    const called = await modelStep(state, step);
    if (called.kind === 'ended') return called.result;
    const ended = await finishStep(state, called.step, called.text, true);
    if (ended) return ended;
  }
  return { outcome: 'failed', reason: RUN_REASON.stepLimit, notice: STEP_LIMIT_MESSAGE, final: true };
}
