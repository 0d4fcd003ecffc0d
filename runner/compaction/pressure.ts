/**
 * The check a run makes at its start and at each turn boundary: estimate the
 * next request, and compact only when it crosses the threshold (or on
 * overflow / `/compact`). Most calls cost no Redis round trip and no model call.
 */
import type { ModelMessage } from 'ai';
import { projectHistory } from '../projection.js';
import { type CompactOptions, type CompactResult, compact, type LoadedBase, readBreaker, shouldCompact } from './compactor.js';
import { type Calibrator, estimateMessages, estimateRequest, type RequestEstimate } from './estimate.js';

/** Options of `compactIfNeeded`. */
export interface CompactIfNeededOptions extends Omit<CompactOptions, 'tokensBefore' | 'estimate' | 'loaded'> {
  /** The prompt as loaded (`loadPrompt`), or as left by the previous compaction. */
  loaded: LoadedBase & { messages: ModelMessage[] };
  /** Learns the provider's tokens per estimated token, per conversation. */
  calibrator?: Calibrator;
  /** Request tokens outside the messages (system prompt, tool definitions). Default 0. */
  overheadTokens?: number;
  /** Messages the run added that are not in the record yet. */
  added?: ModelMessage[];
}

/** What `compactIfNeeded` decided. */
export interface PressureCheck {
  /** The prompt to send: the compacted one, or `loaded.messages` unchanged. */
  messages: ModelMessage[];
  /** What to pass as `loaded` next time (the new checkpoint and kept entries after a compaction). */
  loaded: LoadedBase & { messages: ModelMessage[] };
  /** The estimate of the next request before any compaction. */
  estimate: RequestEstimate;
  /** Present when a compaction was attempted. */
  result?: CompactResult;
}

/** Estimates the next request and compacts when `shouldCompact` says so. */
export async function compactIfNeeded(o: CompactIfNeededOptions): Promise<PressureCheck> {
  const cid = o.run.conversationId;
  const ratio = o.calibrator?.ratio(cid) ?? 1;
  const overhead = o.overheadTokens ?? 0;
  const project = (entries: Parameters<typeof projectHistory>[0]) => projectHistory(entries, { ...o.projection, unclaimed: 'exclude' }).messages;
  const estimate = estimateRequest({
    entries: o.loaded.entries,
    messages: o.loaded.messages,
    overheadTokens: overhead,
    ratio,
    project,
    ...(o.added && { added: o.added }),
  });
  const unchanged: PressureCheck = { messages: o.loaded.messages, loaded: o.loaded, estimate };
  const over = shouldCompact({
    estimate: estimate.tokens,
    contextWindow: o.contextWindow,
    ...(o.threshold !== undefined && { threshold: o.threshold }),
    breakerOpen: false,
    trigger: o.trigger,
  });
  if (!over) return unchanged;
  // Only now is the breaker worth a round trip.
  if (o.trigger === 'pressure' && (await readBreaker(o.state, cid)).open) return unchanged;

  const result = await compact({
    ...o,
    tokensBefore: estimate.tokens,
    estimate: (messages) => Math.ceil(estimateMessages([...messages, ...(o.added ?? [])]) * ratio) + overhead,
  });
  if (result.kind !== 'compacted') return { ...unchanged, result };
  const loaded = { checkpoint: result.checkpoint, raw: result.raw, entries: result.entries, messages: result.messages };
  return { messages: [...result.messages, ...(o.added ?? [])], loaded, estimate, result };
}
