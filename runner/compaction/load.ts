/**
 * Assembling a run's prompt: the checkpoint's summary plus the record after
 * `covers_until`, read in pages. Without a usable checkpoint, a bounded tail
 * of the record — never the whole record.
 */

import type { ModelMessage } from 'ai';
import type { Logger } from 'pino';
import { DEFAULTS } from '../../src/config/defaults.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { readAfter, readRange, readTail } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { type ProjectionOptions, projectHistory } from '../projection.js';
import { CHECKPOINT_KEY, type Checkpoint, type CheckpointRejection, summaryMessages, validateCheckpoint } from './checkpoint.js';

/** Options of `loadPrompt`. */
export interface LoadPromptOptions {
  client: RedisClient;
  /** Key prefix (default of the protocol: `sb`). */
  prefix: string;
  conversationId: string;
  /** Seq of the last reset; read from the meta hash (`reset_seq`) when omitted. */
  resetSeq?: number;
  /** Most entries read when there is no usable checkpoint (bounded tail). Default 2000. */
  tailEntries?: number;
  /** Entries per read after a checkpoint. Default 500. */
  pageSize?: number;
  /** Projection options; `unclaimed` defaults to `exclude` (the runtime's choice). */
  projection?: ProjectionOptions;
  /** The checkpoint and meta fields, when read beforehand (`readPromptHead`): the load then starts with the record. */
  head?: PromptHead;
  logger: Logger;
}

/** What a prompt load reads before the record: the stored checkpoint and the meta fields it is checked against. */
export interface PromptHead {
  /** The raw checkpoint in conversation state, if any. */
  raw: string | undefined;
  /** Seq of the last reset (meta `reset_seq`), 0 when none. */
  resetSeq: number;
  /** Seq of a pending `/compact` (meta `compact_requested`), 0 when none. */
  compactRequested: number;
  /** The conversation's `/model` choice (meta `model`), read with them; undefined: none. */
  modelChoice: string | undefined;
}

/** A prompt head read with other conversation state keys (`readPromptHead`'s `stateKeys`). */
export interface PromptHeadWithState extends PromptHead {
  /** The raw values of the state keys asked for, in their order (undefined: not set). */
  state: Array<string | undefined>;
}

/**
 * The fields a prompt head is made of, with `stateKeys` (other conversation
 * state keys a caller needs at the same moment) read in the checkpoint's own
 * read: what `readPromptHead` reads, and what an acquire reads in its own call
 * (`AcquireReads`).
 */
export function promptHeadReads(stateKeys: readonly string[] = []): { state: string[]; meta: string[] } {
  return { state: [CHECKPOINT_KEY, ...stateKeys], meta: ['reset_seq', 'compact_requested', 'model'] };
}

/** The prompt head from the values of `promptHeadReads`' fields, in their order. */
export function promptHeadOf(state: ReadonlyArray<string | null | undefined>, meta: ReadonlyArray<string | null | undefined>): PromptHeadWithState {
  const [raw, ...rest] = state;
  const [resetRaw, requestedRaw, model] = meta;
  return {
    raw: raw ?? undefined,
    resetSeq: Number(resetRaw ?? 0) || 0,
    compactRequested: Number(requestedRaw ?? 0) || 0,
    modelChoice: model ?? undefined,
    state: rest.map((v) => v ?? undefined),
  };
}

/**
 * Reads the prompt head: two commands of the conversation's slot, sent
 * together. `stateKeys` (other conversation state keys the caller needs at
 * the same moment) are read in the checkpoint's own `HMGET`, not a command each.
 */
export async function readPromptHead(
  client: RedisClient,
  prefix: string,
  conversationId: string,
  stateKeys: readonly string[] = [],
): Promise<PromptHeadWithState> {
  const k = conversationKeys(prefix, conversationId);
  const fields = promptHeadReads(stateKeys);
  const [state, meta] = await Promise.all([client.hmget(k.state, ...fields.state), client.hmget(k.meta, ...fields.meta)]);
  return promptHeadOf(state, meta);
}

/** A run's prompt as loaded. */
export interface LoadedPrompt {
  /** Summary message (when a checkpoint was used) followed by the projected record after it. */
  messages: ModelMessage[];
  /** The checkpoint used, if any. */
  checkpoint: Checkpoint | undefined;
  /** The raw state value read (the CAS base of the next compaction), if any. */
  raw: string | undefined;
  /** Why the stored checkpoint was not used, when it was not. */
  rejected?: CheckpointRejection;
  /** The entries read and projected, in seq order (compaction selects from them). */
  entries: SeqEntry[];
  /** Number of record entries read (the validation probe not counted). */
  entriesRead: number;
  /** Seq of the last entry read, or `covers_until` when nothing followed it (0 for an empty record). */
  lastSeq: number;
  /**
   * A `/compact` (meta `compact_requested`) not applied yet: the next
   * `compaction` entry's append clears it. The run compacts with the
   * `manual` trigger.
   */
  manualRequested: boolean;
  /** Seq of the pending `/compact` (meta `compact_requested`); 0 when none. */
  compactRequestedSeq: number;
}

/** Reads the checkpoint and the record after it, and projects the prompt. */
export async function loadPrompt(o: LoadPromptOptions): Promise<LoadedPrompt> {
  const k = conversationKeys(o.prefix, o.conversationId);
  const { raw: stored, resetSeq, compactRequested: requested } = o.head ?? (await readPromptHead(o.client, o.prefix, o.conversationId));
  // `compact_requested` is cleared by the append of the next compaction entry, so it is pending exactly while set.
  const manualRequested = requested > 0;
  const pageSize = o.pageSize ?? 500;
  // The existence check of the checkpoint's last entry reads the first page after it too: one round trip for both.
  let head: SeqEntry[] = [];
  const validation = await validateCheckpoint(stored, {
    conversationId: o.conversationId,
    resetSeq: o.resetSeq ?? resetSeq,
    seqExists: async (seq) => {
      head = await readRange(o.client, k.log, { fromSeq: seq, count: pageSize + 1 });
      return head[0]?.seq === seq;
    },
  });
  const projection: ProjectionOptions = { unclaimed: 'exclude', ...o.projection };

  if (validation.ok) {
    const { checkpoint } = validation;
    const entries = head.slice(1);
    if (head.length === pageSize + 1) for await (const page of readAfter(o.client, k.log, entries.at(-1)!.seq, pageSize)) entries.push(...page);
    const projected = projectHistory(entries, projection);
    return {
      messages: [...summaryMessages(checkpoint), ...projected.messages],
      checkpoint,
      raw: stored,
      entries,
      entriesRead: entries.length,
      lastSeq: entries.length > 0 ? projected.lastSeq : checkpoint.covers_until,
      manualRequested,
      compactRequestedSeq: requested,
    };
  }

  const { reason } = validation;
  if (reason === 'missing') o.logger.debug('no compaction checkpoint; reading a bounded tail');
  else o.logger.warn({ reason }, 'compaction checkpoint rejected; reading a bounded tail');
  const entries = await readTail(o.client, k.log, o.tailEntries ?? DEFAULTS.compaction.tailEntries);
  const projected = projectHistory(entries, projection);
  return {
    messages: projected.messages,
    checkpoint: undefined,
    raw: stored,
    rejected: reason,
    entries,
    entriesRead: entries.length,
    lastSeq: projected.lastSeq,
    manualRequested,
    compactRequestedSeq: requested,
  };
}
