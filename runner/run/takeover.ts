/**
 * What earlier attempts of a run left in the record, read by the attempt
 * that takes the run over: the final answer they recorded but may not have
 * delivered (the takeover delivers it instead of asking the model again),
 * the anchor of the turn's delivery keys, the steered messages they took
 * and did not answer, and a tool-call step they recorded the calls of but
 * not the results (the takeover finishes it without asking the model).
 * `runProgress` is pure; `readRunEntries` reads the record back to the
 * run's first start.
 */
import type { SeqEntry, ToolCalls } from '../../src/record/entries.js';
import { readRange, readTail } from '../../src/record/read.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { answerText, isFinalStep } from '../projection.js';

/** A final answer recorded by an earlier attempt, for the turn the run is on. */
export interface RecordedAnswer {
  /** The answer text (what the agent loop delivers after recording the step); never blank. */
  text: string;
  /** Seq of its `model.step` entry. */
  stepSeq: number;
}

/** A run's progress as the record shows it. */
export interface RunProgress {
  /**
   * The newest user message the run took (its inputs, steering it pulled or
   * was handed back): the anchor of the turn's delivery keys
   * (`<run id>:<anchor>:<n>`), as the attempt that recorded the answer used it.
   */
  anchor: number;
  /**
   * The run's last step, when it is a final answer (with text) recorded after
   * the run last took a message: the turn is answered in the record, so what
   * is left to do is delivering it. Undefined when the turn still needs the model.
   */
  answer: RecordedAnswer | undefined;
  /** The run recorded a final answer: its inputs are answered (steering taken after it is `unansweredSteered`). */
  inputsAnswered: boolean;
  /** Seqs of messages steered into the run (`steering.injected`) since its last final answer, oldest first. */
  unansweredSteered: number[];
  /**
   * The run's last recorded tool calls (`tool.calls`) when no `model.step`
   * follows them: the step the attempt died in, to finish from the record.
   */
  unfinishedStep?: SeqEntry<ToolCalls>;
}

/**
 * The progress of `runId` in `entries` (seq order). Entries of other runs are
 * ignored. `run.started` of a later attempt lists the same inputs again: only
 * a message the run had not taken before starts a new turn.
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one pass over the record, one branch per entry kind that moves the run's progress; the branches share the progress state
export function runProgress(entries: readonly SeqEntry[], runId: string): RunProgress {
  const taken = new Set<number>();
  let anchor = 0;
  let answer: RecordedAnswer | undefined;
  let inputsAnswered = false;
  let unansweredSteered: number[] = [];
  let unfinishedStep: SeqEntry<ToolCalls> | undefined;
  for (const e of entries) {
    if ((e.kind === 'run.started' || e.kind === 'steering.injected') && e.run === runId) {
      const fresh = (e.kind === 'run.started' ? (e.inputs ?? []) : e.seqs).filter((s) => !taken.has(s));
      if (fresh.length === 0) continue;
      for (const s of fresh) {
        taken.add(s);
        if (s > anchor) anchor = s;
      }
      // A message taken after the answer: the answer is not the turn's any more.
      answer = undefined;
      if (e.kind === 'steering.injected') unansweredSteered.push(...fresh);
    } else if (e.kind === 'tool.calls' && e.run === runId) {
      unfinishedStep = e;
    } else if (e.kind === 'model.step' && e.run === runId) {
      unfinishedStep = undefined;
      if (isFinalStep(e)) {
        // An empty answer is not one to deliver: the prompt does not end with it (the projection drops
        // empty messages), so asking the model again is a retry, as a live attempt would have told the user.
        const text = answerText(e.messages);
        answer = text.trim() ? { text, stepSeq: e.seq } : undefined;
        inputsAnswered = true;
        unansweredSteered = [];
      } else {
        answer = undefined;
      }
    }
  }
  // Without the run's first start the turn's anchor is unknown: delivering the answer under a guessed
  // delivery key could send it twice, so the model is asked again instead.
  if (!entries.some((e) => e.kind === 'run.started' && e.run === runId && e.attempt === 1)) answer = undefined;
  return { anchor, answer, inputsAnswered, unansweredSteered, ...(unfinishedStep && { unfinishedStep }) };
}

/**
 * The record's last entries, read backwards in pages until the first
 * `run.started` of `runId` (everything the run wrote comes after it) or
 * `maxEntries` were read; in seq order. A takeover usually reads one page.
 */
export async function readRunEntries(client: RedisClient, logKey: string, runId: string, maxEntries: number, pageSize = 200): Promise<SeqEntry[]> {
  const isStart = (e: SeqEntry) => e.kind === 'run.started' && e.run === runId && e.attempt === 1;
  let entries = await readTail(client, logKey, Math.min(pageSize, maxEntries));
  // Seqs are consecutive (`<seq>-0`), so the page before seq `first` is the range [first - n, first - 1].
  while (entries.length > 0 && entries.length < maxEntries && !entries.some(isStart)) {
    const first = entries[0]!.seq;
    if (first <= 1) break;
    const n = Math.min(pageSize, maxEntries - entries.length, first - 1);
    const page = await readRange(client, logKey, { fromSeq: first - n, toSeq: first - 1 });
    if (page.length === 0) break;
    entries = [...page, ...entries];
  }
  return entries;
}
