/**
 * A run created by `/compact` while the conversation was idle: it compacts
 * first. Messages that joined it while it was queued are its inputs and are
 * answered afterwards, as is steering finish hands back; with none, the run
 * ends after compacting. The summarizer is a model call like a step's: the
 * run is admitted by the features' before-run hooks (budgets) first, and
 * the call is charged to the run's accountable subjects. Without inputs,
 * the run is accountable to whoever asked for the compaction.
 */
import { RecordError } from '../../src/errors.js';
import type { MessageReceived, SeqEntry } from '../../src/record/entries.js';
import { readSeqs } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { RunCompaction } from '../compaction/hooks.js';
import type { RunResult } from '../plugin.js';
import type { RunAttempt } from './attempt.js';
import { featuresBefore, type InvocationRun } from './features.js';
import { type AfterFinish, finishRun } from './finish.js';
import type { ExecutorOptions } from './options.js';

/** What follows the compaction: as `finishRun`'s, or `refused` (a feature ended the run before anything was summarized). */
export type AfterCompaction = AfterFinish | { kind: 'refused'; result: RunResult };

/**
 * Admits the run (`run`: its invocation as features see it), then compacts;
 * then, when the run has no inputs (and no stop), finishes it: its end, or
 * steering handed back. Undefined: the run goes on to answer its inputs.
 * `refused`: the result a feature ended the run with, nothing summarized.
 */
export async function compactOnly(
  o: ExecutorOptions,
  attempt: RunAttempt,
  compaction: RunCompaction,
  run: InvocationRun,
): Promise<AfterCompaction | undefined> {
  // A new run counts against runs per hour here (its first invocation only checks); a takeover only checks.
  const refused = await featuresBefore(o.features, run, attempt.acquired.attempt === 1);
  if (refused) {
    attempt.logger.info({ reason: refused.reason }, 'manual compaction refused before the summarizer was called');
    return { kind: 'refused', result: refused };
  }
  const compacted = await compaction.manualOnly();
  attempt.logger.info({ compacted, inputs: run.inputs.length }, 'manual compaction run');
  if (run.inputs.length > 0 || attempt.stopKind) return undefined;
  return finishRun(o, attempt, 'completed');
}

/**
 * Who asked for the compaction a run applies (`seq`: meta `compact_requested`
 * as the attempt read it): the sender of that `/compact`, when the
 * conversation's channel delivered it (its update key is the channel's,
 * `<channel id>:…`, as every channel's is); undefined (the operator) for one
 * sent otherwise (the console's), none asked, or one the record no longer holds.
 */
export async function compactRequester(o: ExecutorOptions, conversationId: string, seq: number): Promise<Pick<MessageReceived, 'sender'> | undefined> {
  if (seq <= 0) return undefined;
  let entry: SeqEntry | undefined;
  try {
    [entry] = await readSeqs(o.client, conversationKeys(o.prefix, conversationId).log, [seq]);
  } catch (err) {
    if (err instanceof RecordError) return undefined;
    throw err;
  }
  if (entry?.kind !== 'command.received' || !entry.updateKey.startsWith(`${o.channels.channelOf(conversationId)}:`)) return undefined;
  return { sender: entry.sender };
}
