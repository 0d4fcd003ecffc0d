/**
 * Finish and hand-back: the run's outcome goes through the finish script,
 * which either hands back steering that arrived after the plugin's last
 * pull (the run continues with it: nothing falls between the last look and
 * the end) or ends the run, creating its successor when messages wait (a
 * failed run's follow-up among them).
 */
import type { MessageReceived, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import type { RunAttempt } from './attempt.js';
import type { ExecutionResult, ExecutorOptions } from './options.js';
import { isMessage } from './start.js';

/** What follows a finish: another invocation with the handed-back messages, or the execution's end. */
export type AfterFinish = { kind: 'continue'; inputs: Array<SeqEntry<MessageReceived>> } | { kind: 'ended'; result: ExecutionResult };

/**
 * Finishes the run with `outcome`; a successor it creates is enqueued before
 * this returns. `retry`: seqs a failed run hands to a follow-up run.
 */
export async function finishRun(
  o: ExecutorOptions,
  attempt: RunAttempt,
  outcome: RunOutcome,
  reason = '',
  retry: readonly number[] = [],
): Promise<AfterFinish> {
  const { ref, logger } = attempt;
  const fin = await o.runs.finish(ref, outcome, { reason, mode: o.settings.steeringMode, retry });
  if (fin.kind === 'continue') {
    logger.info({ seqs: fin.messages.map((m) => m.seq) }, 'finish handed back steering; continuing');
    return { kind: 'continue', inputs: fin.messages.filter(isMessage) };
  }
  logger.info({ outcome, successor: fin.successor?.runId }, 'run ended');
  if (fin.successor) await o.enqueue(ref.conversationId, fin.successor.runId);
  return { kind: 'ended', result: { kind: 'finished', outcome, ...(fin.successor && { successorId: fin.successor.runId }) } };
}
