/**
 * A run created by `/compact` while the conversation was idle: it compacts
 * first. Messages that joined it while it was queued are its inputs and are
 * answered afterwards, as is steering finish hands back; with none, the run
 * ends after compacting.
 */
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';
import type { RunCompaction } from '../compaction/hooks.js';
import type { RunAttempt } from './attempt.js';
import { type AfterFinish, finishRun } from './finish.js';
import type { ExecutorOptions } from './options.js';

/**
 * Compacts; then, when the run has no inputs (and no stop), finishes it:
 * its end, or steering handed back. Undefined: the run goes on to answer its inputs.
 */
export async function compactOnly(
  o: ExecutorOptions,
  attempt: RunAttempt,
  compaction: RunCompaction,
  inputs: ReadonlyArray<SeqEntry<MessageReceived>>,
): Promise<AfterFinish | undefined> {
  const compacted = await compaction.manualOnly();
  attempt.logger.info({ compacted, inputs: inputs.length }, 'manual compaction run');
  if (inputs.length > 0 || attempt.stopKind) return undefined;
  return finishRun(o, attempt, 'completed');
}
