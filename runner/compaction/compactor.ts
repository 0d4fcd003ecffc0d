/**
 * The thin store around the pure parts: decides when to compact, writes the
 * new checkpoint with a compare-and-set on the one the run started from,
 * appends the `compaction` record entry, and keeps the circuit breaker that
 * stops pressure compaction after repeated ineffective ones.
 */

import type { LanguageModel, ModelMessage } from 'ai';
import type { Logger } from 'pino';
import { DEFAULTS } from '../../src/config/defaults.js';
import { CasConflictError } from '../../src/errors.js';
import type { RunRef } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import { type BreakerState, breakerValue, parseBreaker } from '../../src/record/breaker.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { type ProjectionOptions, projectHistory } from '../projection.js';
import { CHECKPOINT_KEY, CHECKPOINT_SCHEMA_VERSION, type Checkpoint, summaryMessages } from './checkpoint.js';
import { estimateMessages } from './estimate.js';
import { selectTurns } from './select.js';
import { type SummaryUsage, summarize } from './summarize.js';

/** Conversation state key of the circuit breaker. */
export const BREAKER_KEY = 'runner.compaction.breaker';
/** Consecutive ineffective compactions that open the breaker. */
export const BREAKER_LIMIT = 3;

/** Why a compaction is considered: context pressure, a provider overflow error, or `/compact`. */
export type CompactionTrigger = 'pressure' | 'overflow' | 'manual';

/** Input of `shouldCompact`. */
export interface ShouldCompactInput {
  /** Estimated input tokens of the next request. */
  estimate: number;
  /** Tokens the prompt may use: the model's context window less its output reserve. */
  contextWindow: number;
  /** Fraction of `contextWindow` that triggers pressure compaction. Default 0.8. */
  threshold?: number;
  /** Whether the conversation's breaker is open. */
  breakerOpen: boolean;
  trigger: CompactionTrigger;
}

/**
 * Whether to compact now. `manual` and `overflow` always do (overflow is
 * bounded by its caller: once per failed step); `pressure` does when the
 * estimate is over `threshold × contextWindow` and the breaker is closed.
 */
export function shouldCompact(i: ShouldCompactInput): boolean {
  if (i.trigger !== 'pressure') return true;
  return !i.breakerOpen && i.estimate > (i.threshold ?? DEFAULTS.compaction.threshold) * i.contextWindow;
}

const CLOSED: BreakerState = { open: false, ineffective: 0 };

/** Reads the breaker; an absent or unreadable value is a closed breaker. */
export async function readBreaker(state: ConversationState, conversationId: string): Promise<BreakerState> {
  return parseBreaker(await state.get(conversationId, BREAKER_KEY));
}

/** The prompt a run loaded, as `loadPrompt` returns it. */
export interface LoadedBase {
  /** The checkpoint in use, if any. */
  checkpoint: Checkpoint | undefined;
  /** The raw stored checkpoint value the run read (the CAS base); undefined when absent. */
  raw: string | undefined;
  /** Record entries after the checkpoint (or the bounded tail), in seq order, up to now. */
  entries: SeqEntry[];
  /** Seq of the `/compact` read with them (0 or absent: none); a compaction of these entries satisfies it. */
  compactRequestedSeq?: number;
}

/** Options of `compact`. */
export interface CompactOptions {
  run: RunRef;
  state: ConversationState;
  /** What the run loaded; reload (loadPrompt) before compacting mid-run so the run's own steps are in `entries`. */
  loaded: LoadedBase;
  trigger: CompactionTrigger;
  /** Estimated request tokens before compacting (recorded as `tokens_before`). */
  tokensBefore: number;
  /** Tokens the prompt may use (context window less output reserve). */
  contextWindow: number;
  /** Default 0.8. A compaction leaving the estimate above `threshold × contextWindow` is ineffective. */
  threshold?: number;
  /** The summarizer model; without one the deterministic summary is written. */
  model?: LanguageModel;
  /** Complete turns kept verbatim. Default 4, and 0 for `overflow` (everything but the run in progress). */
  keepRecentTurns?: number;
  /** Longest summary, in characters. Default 6000. */
  maxSummaryChars?: number;
  /** Request tokens of a prompt (calibrated, system prompt and tools included). Default `estimateMessages`. */
  estimate?: (messages: ModelMessage[]) => number;
  /** Projection options of the runtime (`unclaimed` is `exclude`). */
  projection?: ProjectionOptions;
  /** Aborts the summarizer call (the fallback summary is written). */
  signal?: AbortSignal;
  /**
   * Charges the summarizer call's usage (what the provider may bill for it)
   * as soon as the call ends, before anything is written: a call whose
   * checkpoint then loses its CAS was billed too. A throw fails the
   * compaction (nothing written). Without it nothing is charged.
   */
  charge?: (usage: SummaryUsage) => Promise<void>;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
  logger: Logger;
}

/** What `compact` did. */
export type CompactResult =
  | {
      kind: 'compacted';
      checkpoint: Checkpoint;
      /** The stored value (the CAS base of the next compaction). */
      raw: string;
      /** The new prompt: summary message + the kept entries' projection. */
      messages: ModelMessage[];
      /** The kept entries (after the new `covers_until`) and the `compaction` entry. */
      entries: SeqEntry[];
      /** Seq of the `compaction` record entry. */
      seq: number;
      /** Whether the estimate fell to the threshold or below. */
      effective: boolean;
      breaker: BreakerState;
    }
  | { kind: 'skipped'; reason: 'breaker-open' | 'nothing-to-compact' }
  /** Another writer's checkpoint landed first; it stands, this one was discarded. `current` is its raw value. */
  | { kind: 'conflict'; current: string | undefined };

/**
 * Summarizes the oldest whole turns of `loaded.entries` into a new checkpoint.
 * Throws StaleRunError when the run lost its fence (nothing written then).
 */
export async function compact(o: CompactOptions): Promise<CompactResult> {
  const now = o.now ?? Date.now;
  const cid = o.run.conversationId;
  const stored = await readBreaker(o.state, cid);
  const breaker = o.trigger === 'manual' ? { ...CLOSED } : stored; // `/compact` resets the breaker
  if (o.trigger === 'pressure' && breaker.open) return { kind: 'skipped', reason: 'breaker-open' };

  const keepRecentTurns = o.keepRecentTurns ?? (o.trigger === 'overflow' ? 0 : DEFAULTS.compaction.keepRecentTurns);
  const selection = selectTurns(o.loaded.entries, { keepRecentTurns, ...(o.projection && { projection: o.projection }) });
  if (!selection) {
    if (o.trigger === 'manual' && (stored.open || stored.ineffective > 0)) await writeBreaker(o, breaker, now());
    return { kind: 'skipped', reason: 'nothing-to-compact' };
  }
  const { summary, summarizer, usage } = await summaryOf(o, selection.messages);
  if (usage) await o.charge?.(usage);

  const messages = [...summaryMessages({ summary }), ...projectHistory(selection.kept, { ...o.projection, unclaimed: 'exclude' }).messages];
  const tokensAfter = (o.estimate ?? estimateMessages)(messages);
  const checkpoint: Checkpoint = {
    schema_version: CHECKPOINT_SCHEMA_VERSION,
    conversation_id: cid,
    summary,
    covers_until: selection.coversUntil,
    tokens_before: Math.max(0, Math.round(o.tokensBefore)),
    tokens_after: tokensAfter,
    created_at: now(),
    summarizer,
  };
  const entry = compactionEntry(checkpoint, o.run.runId);
  const effective = tokensAfter <= (o.threshold ?? DEFAULTS.compaction.threshold) * o.contextWindow;
  const ineffective = effective ? 0 : breaker.ineffective + 1;
  const next: BreakerState = { ineffective, open: ineffective >= BREAKER_LIMIT };
  const breakerChanged = next.ineffective !== stored.ineffective || next.open !== stored.open;
  let seq: number;
  try {
    // Checkpoint, record entry and breaker in one fenced script.
    seq = await o.state.commitCompaction(o.run, {
      checkpoint: { key: CHECKPOINT_KEY, value: checkpoint, expect: o.loaded.raw === undefined ? { kind: 'absent' } : { kind: 'equals', raw: o.loaded.raw } },
      entry,
      ...(breakerChanged && { breaker: { key: BREAKER_KEY, value: breakerValue(next, checkpoint.created_at) } }),
      compactRequestedSeq: o.loaded.compactRequestedSeq ?? 0,
    });
  } catch (err) {
    if (!(err instanceof CasConflictError)) throw err;
    o.logger.info({ coversUntil: checkpoint.covers_until }, 'a concurrent compaction won; discarding this checkpoint');
    return { kind: 'conflict', current: err.current };
  }
  o.logger.info(
    {
      trigger: o.trigger,
      coversUntil: checkpoint.covers_until,
      turns: selection.turns,
      tokensBefore: checkpoint.tokens_before,
      tokensAfter,
      summarizer,
      effective,
      breakerOpen: next.open,
    },
    'compacted the conversation',
  );
  return {
    kind: 'compacted',
    checkpoint,
    raw: JSON.stringify(checkpoint),
    messages,
    entries: [...selection.kept, { ...entry, seq }],
    seq,
    effective,
    breaker: next,
  };
}

/** The summary of `turns`, continuing the checkpoint's unless a reset among the entries cleared that history. */
async function summaryOf(o: CompactOptions, turns: Parameters<typeof summarize>[0]['turns']): Promise<Awaited<ReturnType<typeof summarize>>> {
  const resetInside = o.loaded.entries.some((e) => e.kind === 'conversation.reset');
  const previousSummary = resetInside ? undefined : o.loaded.checkpoint?.summary;
  return summarize({
    turns,
    ...(o.model && { model: o.model }),
    ...(previousSummary !== undefined && { previousSummary }),
    ...(o.maxSummaryChars !== undefined && { maxChars: o.maxSummaryChars }),
    ...(o.signal && { signal: o.signal }),
    logger: o.logger,
  });
}

/** The record entry written with `checkpoint`. */
function compactionEntry(checkpoint: Checkpoint, run: string) {
  return {
    v: 1,
    kind: 'compaction',
    at: checkpoint.created_at,
    run,
    covers_until: checkpoint.covers_until,
    tokens_before: checkpoint.tokens_before,
    tokens_after: checkpoint.tokens_after,
    summarizer: checkpoint.summarizer,
  } as const;
}

async function writeBreaker(o: Pick<CompactOptions, 'state' | 'run'>, b: BreakerState, at: number): Promise<void> {
  await o.state.set(o.run, BREAKER_KEY, breakerValue(b, at));
}

/** The stored form of the breaker. */
