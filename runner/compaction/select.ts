/**
 * Which part of the record a compaction summarizes. Pure.
 *
 * Selection works on record entries, not on projected messages: the new
 * `covers_until` must be a seq, and only the record knows where a run begins
 * and ends and where each user message was placed. A turn is one run.
 *
 * A seq B is a turn boundary when cutting the record after it changes nothing
 * the model sees: B is a `run.ended` entry, every run started at or before B
 * has ended at or before B (nothing of a run in progress is summarized, and
 * a tool call and its result, which belong to one run, stay together), and
 * every user message at or before B was placed (injected or taken as a run
 * input) at or before B. Then projecting the entries up to B and the entries
 * after B separately gives the same messages as projecting them together.
 *
 * The selection is the oldest whole turns up to the last boundary that still
 * leaves `keepRecentTurns` complete turns after it. What the summarizer reads
 * is their projection, so answers of failed and superseded runs (kept in the
 * record, never in the prompt) are not summarized either.
 */

import type { ModelMessage } from 'ai';
import { DEFAULTS } from '../../src/config/defaults.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { type ProjectionOptions, placements, projectHistory } from '../projection.js';

/** Options of `selectTurns`. */
export interface SelectOptions {
  /** Complete turns (ended runs) left after the boundary, not summarized. Default 4. */
  keepRecentTurns?: number;
  /** Projection options used to render the selected turns (`unclaimed` is `exclude`). */
  projection?: ProjectionOptions;
}

/** The turns a compaction summarizes. */
export interface Selection {
  /** Seq of the last entry summarized: the new checkpoint's `covers_until`. */
  coversUntil: number;
  /** Entries summarized (after the last reset, up to `coversUntil`), in seq order. */
  entries: SeqEntry[];
  /** Their projection: what the summarizer reads. */
  messages: ModelMessage[];
  /** Entries after `coversUntil`, in seq order: what the next prompt replays verbatim. */
  kept: SeqEntry[];
  /** Complete turns summarized. */
  turns: number;
  /** Complete turns kept. */
  keptTurns: number;
}

/**
 * Seqs of the turn boundaries among `entries` (in seq order), oldest first.
 * Entries at or before the last reset are not considered.
 */
export function turnBoundaries(entries: readonly SeqEntry[]): number[] {
  const live = afterLastReset(entries);
  const placedAt = placements(live);
  const open = new Set<string>();
  const out: number[] = [];
  let needsUntil = 0; // no boundary before the latest placement of a message seen so far
  for (const e of live) {
    if (e.kind === 'message.received') needsUntil = Math.max(needsUntil, placedAt.get(e.seq) ?? Infinity);
    else if (e.kind === 'run.started') open.add(e.run);
    else if (e.kind === 'run.ended') {
      open.delete(e.run);
      if (open.size === 0 && needsUntil <= e.seq) out.push(e.seq);
    }
  }
  return out;
}

/**
 * Selects the oldest whole turns to summarize, or undefined when no boundary
 * leaves `keepRecentTurns` complete turns after it.
 */
export function selectTurns(entries: readonly SeqEntry[], opts: SelectOptions = {}): Selection | undefined {
  const keep = Math.max(0, opts.keepRecentTurns ?? DEFAULTS.compaction.keepRecentTurns);
  const live = afterLastReset(entries);
  const endedAt = live.filter((e) => e.kind === 'run.ended').map((e) => e.seq);
  const turnsAfter = (seq: number) => endedAt.length - countUpTo(endedAt, seq);
  const boundary = turnBoundaries(live).findLast((b) => turnsAfter(b) >= keep);
  if (boundary === undefined) return undefined;
  const selected = live.filter((e) => e.seq <= boundary);
  const kept = live.filter((e) => e.seq > boundary);
  return {
    coversUntil: boundary,
    entries: selected,
    messages: projectHistory(selected, { ...opts.projection, unclaimed: 'exclude' }).messages,
    kept,
    turns: countUpTo(endedAt, boundary),
    keptTurns: turnsAfter(boundary),
  };
}

function afterLastReset(entries: readonly SeqEntry[]): SeqEntry[] {
  const i = entries.findLastIndex((e) => e.kind === 'conversation.reset');
  return entries.slice(i + 1);
}

function countUpTo(sortedSeqs: number[], seq: number): number {
  let n = 0;
  while (n < sortedSeqs.length && sortedSeqs[n]! <= seq) n++;
  return n;
}
