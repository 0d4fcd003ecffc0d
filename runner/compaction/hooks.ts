/**
 * Compaction as a run sees it: the prompt a run starts from (checkpoint +
 * the record after it, compacted first when over the threshold or when
 * `/compact` was asked), and the hooks the agent loop calls at turn
 * boundaries and on a provider context-overflow error.
 */
import type { LanguageModel, ModelMessage } from 'ai';
import type { Logger } from 'pino';
import { StaleRunError } from '../../src/errors.js';
import type { RunRef, Runs } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { RedisClient } from '../../src/scripts/index.js';
import { type CompactionFacts, traceCompaction } from '../../src/telemetry/run-trace.js';
import type { CompactionHooks } from '../plugin.js';
import { type CompactionTrigger, type CompactResult, shouldCompact } from './compactor.js';
import { type Calibrator, estimateMessages } from './estimate.js';
import { type LoadedPrompt, loadPrompt, type PromptHead } from './load.js';
import { compactIfNeeded, type PressureCheck } from './pressure.js';
import type { SummaryUsage } from './summarize.js';

/** Compaction settings of a runner. */
export interface CompactionSettings {
  /** Model that writes summaries; without one the deterministic fallback summary is used. */
  model?: LanguageModel;
  /** Fraction of the usable context window that triggers compaction. Default 0.8. */
  threshold?: number;
  /** Complete turns kept verbatim after the summary. Default 4. */
  keepRecentTurns?: number;
  /** Longest summary, in characters. Default 6000. */
  maxSummaryChars?: number;
}

/** What one run needs to compact. */
export interface RunCompactionOptions {
  client: RedisClient;
  prefix: string;
  runs: Runs;
  state: ConversationState;
  run: RunRef;
  /** Usable context: the model's window minus its output reserve, in tokens. */
  contextWindow: number;
  /** Bounded tail read when there is no valid checkpoint, in entries. */
  tailEntries: number;
  settings: CompactionSettings;
  calibrator: Calibrator;
  signal: AbortSignal;
  /**
   * Charges each summarizer call's usage to the run's accountable subjects,
   * as a model step's is (the runner features' `spent`); a throw fails that
   * compaction.
   */
  charge: (usage: SummaryUsage) => Promise<void>;
  logger: Logger;
}

/** Compaction state of one run invocation. */
export class RunCompaction implements CompactionHooks {
  private overhead = 0;
  private manualSeen = 0;

  private preloaded: Promise<LoadedPrompt> | undefined;

  constructor(private readonly o: RunCompactionOptions) {}

  /**
   * Starts the load `initialPrompt` will use, from a head read beforehand, so
   * the record read overlaps whatever the run does before its invocation. A
   * load that is never used is a wasted read and nothing else.
   */
  preload(head: PromptHead): void {
    const loading = this.load(head);
    loading.catch(() => undefined);
    this.preloaded = loading;
  }

  private load(head?: PromptHead): Promise<LoadedPrompt> {
    const o = this.o;
    return loadPrompt({
      client: o.client,
      prefix: o.prefix,
      conversationId: o.run.conversationId,
      tailEntries: o.tailEntries,
      logger: o.logger,
      ...(head && { head }),
    });
  }

  private async compactWith(trigger: CompactionTrigger, loaded: LoadedPrompt): Promise<PressureCheck | undefined> {
    const o = this.o;
    const startedAt = Date.now();
    try {
      const check = await compactIfNeeded({
        run: o.run,
        state: o.state,
        loaded,
        trigger,
        contextWindow: o.contextWindow,
        ...(o.settings.threshold !== undefined && { threshold: o.settings.threshold }),
        ...(trigger === 'overflow' ? { keepRecentTurns: 0 } : o.settings.keepRecentTurns !== undefined && { keepRecentTurns: o.settings.keepRecentTurns }),
        ...(o.settings.maxSummaryChars !== undefined && { maxSummaryChars: o.settings.maxSummaryChars }),
        ...(o.settings.model && { model: o.settings.model }),
        calibrator: o.calibrator,
        overheadTokens: this.overhead,
        signal: o.signal,
        charge: o.charge,
        logger: o.logger,
      });
      if (check.result) traceCompaction(trigger, startedAt, compactionFacts(check.result));
      return check;
    } catch (err) {
      if (err instanceof StaleRunError) throw err;
      traceCompaction(trigger, startedAt, { outcome: 'failed', error: err });
      o.logger.warn({ err }, 'compaction failed; keeping the uncompacted prompt');
      return undefined;
    }
  }

  /**
   * The newest user message this run has taken (its inputs, or steering it
   * pulled or was handed), as of the last `initialPrompt`: the record-based
   * anchor of delivery keys, stable across attempts of the same turn.
   */
  answerAnchor = 0;

  /** The prompt a run (or a continuation) starts from; compacts first when needed. */
  async initialPrompt(): Promise<ModelMessage[]> {
    const preloaded = this.preloaded;
    this.preloaded = undefined;
    const loaded = await (preloaded ?? this.load());
    this.answerAnchor = lastTakenSeq(loaded.entries, this.o.run.runId);
    const check = await this.compactWith(loaded.manualRequested ? 'manual' : 'pressure', loaded);
    if (loaded.manualRequested) await this.settleManual(check, loaded.compactRequestedSeq);
    // The /compact the load saw is applied now or was by an earlier run: the boundaries react only to a newer one.
    this.manualSeen = loaded.compactRequestedSeq;
    if (check?.result?.kind === 'compacted') this.o.logger.info({ trigger: loaded.manualRequested ? 'manual' : 'pressure' }, 'compacted at run start');
    return check?.messages ?? loaded.messages;
  }

  /** A `/compact` run of its own (idle conversation): compact and return. */
  async manualOnly(): Promise<boolean> {
    const loaded = await this.load();
    const check = await this.compactWith('manual', loaded);
    await this.settleManual(check, loaded.compactRequestedSeq);
    return check?.result?.kind === 'compacted';
  }

  /** The `/compact` seq a steering pull just read (pull and check share one round trip). */
  noteRequested(seq: number): void {
    this.pulledRequest = seq;
  }

  private pulledRequest: number | undefined;

  async atBoundary(messages: ModelMessage[]): Promise<ModelMessage[] | undefined> {
    const o = this.o;
    // Normally the pull at this boundary already read it; a plugin that did not pull costs one read.
    const requested = this.pulledRequest ?? (await this.requestedSeq());
    this.pulledRequest = undefined;
    const estimate = o.calibrator.calibrate(o.run.conversationId, estimateMessages(messages)) + this.overhead;
    const manual = requested > this.manualSeen;
    if (
      !manual &&
      !shouldCompact({
        estimate,
        contextWindow: o.contextWindow,
        ...(o.settings.threshold !== undefined && { threshold: o.settings.threshold }),
        breakerOpen: false,
        trigger: 'pressure',
      })
    ) {
      return undefined;
    }
    this.manualSeen = requested;
    // O(tail): this run's steps and the steering it pulled are already in the record.
    const check = await this.compactWith(manual ? 'manual' : 'pressure', await this.load());
    if (manual) await this.settleManual(check, requested);
    return check?.result?.kind === 'compacted' ? check.messages : undefined;
  }

  /**
   * A `/compact` that found nothing to compact is done: clear it (up to the
   * seq this run read), so `/status` stops reporting it and later runs stop
   * retrying it. A failure to clear only leaves it pending.
   */
  private async settleManual(check: PressureCheck | undefined, seenSeq: number): Promise<void> {
    if (seenSeq <= 0 || check?.result?.kind !== 'skipped' || check.result.reason !== 'nothing-to-compact') return;
    try {
      await this.o.state.clearCompactRequest(this.o.run, seenSeq);
    } catch (err) {
      if (err instanceof StaleRunError) throw err;
      this.o.logger.warn({ err }, 'could not clear a /compact that found nothing to compact; it stays requested');
    }
  }

  async onOverflow(): Promise<ModelMessage[] | undefined> {
    const check = await this.compactWith('overflow', await this.load());
    return check?.result?.kind === 'compacted' ? check.messages : undefined;
  }

  observe(messages: ModelMessage[], inputTokens: number, overheadTokens = 0): void {
    this.overhead = overheadTokens;
    this.o.calibrator.observe(this.o.run.conversationId, inputTokens, estimateMessages(messages) + overheadTokens);
  }

  private async requestedSeq(): Promise<number> {
    const k = conversationKeys(this.o.prefix, this.o.run.conversationId);
    return Number(await this.o.client.hget(k.meta, 'compact_requested')) || 0;
  }
}

/** Highest message seq the run took: its `run.started` inputs and every `steering.injected` for it. */
function lastTakenSeq(entries: SeqEntry[], runId: string): number {
  let max = 0;
  for (const e of entries) {
    const seqs = e.kind === 'run.started' && e.run === runId ? e.inputs : e.kind === 'steering.injected' && e.run === runId ? e.seqs : undefined;
    for (const s of seqs ?? []) if (s > max) max = s;
  }
  return max;
}

/** What the `compaction` span and metrics say about a result. */
function compactionFacts(r: CompactResult): CompactionFacts {
  if (r.kind === 'skipped') return { outcome: 'skipped', reason: r.reason };
  if (r.kind === 'conflict') return { outcome: 'conflict' };
  return {
    outcome: r.effective ? 'compacted' : 'ineffective',
    tokensBefore: r.checkpoint.tokens_before,
    tokensAfter: r.checkpoint.tokens_after,
    summarizer: r.checkpoint.summarizer,
    breakerOpen: r.breaker.open,
    breakerOpened: !r.effective && r.breaker.open,
  };
}
