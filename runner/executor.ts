/**
 * Executes one run: acquire (fenced), keep the lease, hand a RunContext to
 * the runner plugin, and finish through the protocol. When finish hands
 * back steering that arrived after the plugin's last pull, the plugin is
 * invoked again with those messages: nothing falls between the last look
 * and the end of the run.
 *
 * An attempt that takes a run over reads what the earlier one left in the
 * record first: a final answer recorded but perhaps never delivered is
 * delivered (same delivery keys, so one already acknowledged is not sent
 * again) instead of asking the model again. Steered messages a run took and
 * then did not answer (it failed or was stopped) are named in the message
 * the user gets and kept for `/status`.
 */

import type { Logger } from 'pino';
import { DEFAULTS } from '../src/defaults.js';
import { CasConflictError, RunEndedError, StaleRunError } from '../src/errors.js';
import { conversationKeys } from '../src/keys.js';
import { runLogger } from '../src/logger.js';
import type { RunRef, Runs } from '../src/protocol/runs.js';
import type { ConversationState } from '../src/protocol/state.js';
import type { SteeringMode, StopKind } from '../src/protocol/types.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../src/record/entries.js';
import { readSeqs } from '../src/record/read.js';
import { UNANSWERED_KEY, unansweredNote, unansweredNotice } from '../src/record/unanswered.js';
import type { RedisClient } from '../src/scripts/index.js';
import { RunTrace, tracePull } from '../src/telemetry/run-trace.js';
import { RunApprovals } from './approval.js';
import { RedisArtifacts } from './artifacts.js';
import { Calibrator } from './compaction/estimate.js';
import { type CompactionSettings, RunCompaction } from './compaction-hooks.js';
import type { ControlListener } from './control.js';
import { type OutboundResolver, RunDelivery } from './delivery.js';
import { keepLease } from './lease.js';
import type { ModelSettings, RunContext, RunnerPlugin, RunResult, StepRecord } from './plugin.js';
import { isFinalStep } from './projection.js';
import { type RecordedAnswer, readRunEntries, runProgress } from './takeover.js';
import { earlierApprovalRequests, pendingToolCalls, RunToolJournal, usedApprovals } from './tool-journal.js';

/** Options of the executor (one per runner process). */
export interface ExecutorOptions {
  client: RedisClient;
  prefix: string;
  runs: Runs;
  state: ConversationState;
  plugin: RunnerPlugin;
  control: ControlListener;
  /** Enqueues a successor run's job. */
  enqueue(conversationId: string, runId: string): Promise<void>;
  resolveOutbound: OutboundResolver;
  logger: Logger;
  /** Worker identity recorded on the run. */
  owner: string;
  leaseMs: number;
  heartbeatMs: number;
  model: ModelSettings;
  /** Steering mode of continuations handed back by finish. Default `all`. */
  steeringMode?: SteeringMode;
  /** Most record entries read to build a prompt (bounded tail), and read by an attempt taking a run over. Default 2000. */
  historyTailEntries?: number;
  /** Text sent to the user when a run fails unexpectedly. */
  failureMessage?: string;
  /** Compaction settings (summarizer model, threshold, kept turns). */
  compaction?: CompactionSettings;
  /** How long a conversation's outbox lives after its last delivery, in seconds. Default 604 800 (7 days). */
  outboxTtlSeconds?: number;
  /** Acknowledged outbox records kept per conversation (older ones of ended runs go); 0: no count bound. Default 100. */
  outboxMaxEntries?: number;
}

/** How one execution ended. `lost`: another attempt owns the run; `aborted`: shutdown, left recoverable. */
export type ExecutionResult = { kind: 'finished'; outcome: RunOutcome; successorId?: string } | { kind: 'lost' } | { kind: 'aborted' };

const OUTCOME_OF_STOP: Record<StopKind, RunOutcome> = { interrupt: 'interrupted', supersede: 'superseded', stop: 'stopped' };

export const DEFAULT_FAILURE_MESSAGE = 'Sorry, something went wrong while answering. Please try again.';

/** Runs one run end to end. */
export class RunExecutor {
  private readonly active = new Map<string, AbortController>();
  // Learns each conversation's provider-tokens / estimated-tokens ratio from observed usage.
  private readonly calibrator = new Calibrator();

  constructor(private readonly o: ExecutorOptions) {}

  /** Number of runs executing now. */
  get inFlight(): number {
    return this.active.size;
  }

  /** Aborts every executing run without finishing it (shutdown); they stay recoverable from Redis. */
  abortAll(): number {
    for (const ac of this.active.values()) ac.abort('shutdown');
    return this.active.size;
  }

  /**
   * Acquires and executes the run. Throws LeaseHeldError (retry later),
   * RunEndedError / RunNotFoundError (nothing to do) from acquire.
   */
  async execute(conversationId: string, runId: string): Promise<ExecutionResult> {
    // The `run` span and run metrics (src/telemetry/run-trace.ts): begun once the inputs are read, ended here.
    const telemetry = new RunTrace(this.o.model.name);
    try {
      return telemetry.ended(await this.executeAttempt(conversationId, runId, telemetry));
    } catch (err) {
      telemetry.threw(err);
      throw err;
    }
  }

  private async executeAttempt(conversationId: string, runId: string, telemetry: RunTrace): Promise<ExecutionResult> {
    const o = this.o;
    const acquired = await o.runs.acquire(conversationId, runId, o.owner, o.leaseMs);
    const ref: RunRef = { conversationId, runId, token: acquired.token };
    const logger = runLogger(o.logger, conversationId, runId).child({ attempt: acquired.attempt });
    const ac = new AbortController();
    let stopKind: StopKind | undefined = acquired.stop;
    let lost = false;
    const onStop = (kind: StopKind) => {
      if (stopKind) return;
      stopKind = kind;
      logger.info({ stop: kind }, 'stop requested');
      ac.abort(kind);
    };
    this.active.set(runId, ac);
    const unregister = o.control.register(runId, onStop);
    const lease = keepLease({
      runs: o.runs,
      run: ref,
      heartbeatMs: o.heartbeatMs,
      leaseMs: o.leaseMs,
      onStop,
      logger,
      onLost: () => {
        lost = true;
        ac.abort('lost');
      },
    });
    const delivery = new RunDelivery({
      client: o.client,
      prefix: o.prefix,
      conversationId,
      runId,
      token: acquired.token,
      resolve: o.resolveOutbound,
      logger,
      ...(o.outboxTtlSeconds !== undefined && { outboxTtlSeconds: o.outboxTtlSeconds }),
      ...(o.outboxMaxEntries !== undefined && { outboxMaxEntries: o.outboxMaxEntries }),
    });
    // Steered messages the run took and has not answered yet: a final answer step clears them.
    let unanswered: Array<SeqEntry<MessageReceived>> = [];
    const taken = { add: (m: Array<SeqEntry<MessageReceived>>) => unanswered.push(...m), answered: () => (unanswered = []) };
    try {
      logger.info({ inputs: acquired.inputs }, 'run started');
      const log = conversationKeys(o.prefix, conversationId).log;
      // Pipelined: the note read and a takeover's record read cost no round trip of their own.
      const [inputEntries, noteRaw, runEntries] = await Promise.all([
        readSeqs(o.client, log, acquired.inputs),
        o.state.getRaw(conversationId, UNANSWERED_KEY),
        acquired.attempt > 1 ? readRunEntries(o.client, log, runId, o.historyTailEntries ?? DEFAULTS.compaction.tailEntries) : undefined,
      ]);
      // One read of the record serves the takeover's progress and its tool journal; both live for the whole attempt.
      const takeover = runEntries && (await this.progress(log, runId, runEntries));
      const tools = toolState(o.runs, ref, runEntries ?? []);
      let inputs = inputEntries.filter(isMessage);
      telemetry.begin({ conversationId, runId, attempt: acquired.attempt, token: acquired.token, cause: acquired.cause }, inputs);
      let note = noteRaw;
      let recorded: RecordedAnswer | undefined;
      // The tool-call step an earlier attempt died in: the first invocation finishes it instead of asking the model.
      let unfinished: StepRecord | undefined;
      if (takeover) {
        // Keys of anything sent before a plugin runs (a recorded answer, a notice) are the earlier attempt's.
        delivery.beginTurn(takeover.anchor);
        recorded = takeover.answer;
        unanswered = takeover.unanswered;
        unfinished = takeover.unfinishedStep;
        logger.info(
          { recordedAnswer: recorded?.stepSeq, unansweredSteered: unanswered.map((m) => m.seq), unfinishedStep: unfinished !== undefined },
          'taking over the run',
        );
      }
      if (acquired.cause === 'compact' && !stopKind) {
        // `/compact` while idle: a run of its own that compacts first. Messages that joined it while it
        // was queued are its inputs and are answered below, as is steering finish hands back.
        const compacted = await this.compaction(ref, ac.signal, logger).manualOnly();
        logger.info({ compacted, inputs: inputs.length }, 'manual compaction run');
        if (inputs.length === 0 && !stopKind) {
          const fin = await o.runs.finish(ref, 'completed', { mode: o.steeringMode ?? DEFAULTS.agent.steeringMode });
          if (fin.kind === 'ended') {
            if (fin.successor) await o.enqueue(conversationId, fin.successor.runId);
            return { kind: 'finished', outcome: 'completed', ...(fin.successor && { successorId: fin.successor.runId }) };
          }
          inputs = fin.messages.filter(isMessage);
          taken.add(inputs);
        }
      }
      for (;;) {
        let result: RunResult = { outcome: 'completed' };
        if (recorded) {
          // The turn is answered in the record; an earlier attempt died before (or while) delivering it.
          // Asking the model again would answer an answered prompt: deliver what was recorded.
          logger.info({ stepSeq: recorded.stepSeq }, 'delivering the answer an earlier attempt recorded, without calling the model');
          if (recorded.text.trim()) await delivery.message(recorded.text);
          recorded = undefined;
        } else if (!stopKind) {
          delivery.typing();
          const ctx = await this.context(ref, acquired.attempt, inputs, ac.signal, () => stopKind, delivery, logger, taken, telemetry, tools, unfinished);
          unfinished = undefined;
          try {
            result = await o.plugin.run(ctx);
          } catch (err) {
            if (err instanceof StaleRunError) throw err;
            const aborted = ac.signal.aborted;
            if (!aborted) logger.error({ err }, 'runner plugin threw');
            result = { outcome: 'failed', reason: 'runner plugin error', ...(!aborted && { notice: o.failureMessage ?? DEFAULT_FAILURE_MESSAGE }) };
          }
        }
        if (lost) return { kind: 'lost' };
        if (ac.signal.aborted && ac.signal.reason === 'shutdown') return { kind: 'aborted' };
        const outcome = stopKind ? OUTCOME_OF_STOP[stopKind] : result.outcome;
        note = await this.settleUnanswered(ref, delivery, outcome, result.notice, unanswered, note, logger);
        const fin = await o.runs.finish(ref, outcome, { reason: result.reason ?? '', mode: o.steeringMode ?? DEFAULTS.agent.steeringMode });
        if (fin.kind === 'continue') {
          logger.info({ seqs: fin.messages.map((m) => m.seq) }, 'finish handed back steering; continuing');
          inputs = fin.messages.filter(isMessage);
          taken.add(inputs);
          continue;
        }
        logger.info({ outcome, successor: fin.successor?.runId }, 'run ended');
        if (fin.successor) await o.enqueue(conversationId, fin.successor.runId);
        return { kind: 'finished', outcome, ...(fin.successor && { successorId: fin.successor.runId }) };
      }
    } catch (err) {
      if (err instanceof StaleRunError || err instanceof RunEndedError) {
        logger.warn({ err }, 'run lost to another attempt; stopping');
        return { kind: 'lost' };
      }
      throw err;
    } finally {
      lease.stop();
      unregister();
      delivery.close();
      this.active.delete(runId);
    }
  }

  private async context(
    ref: RunRef,
    attempt: number,
    inputs: Array<SeqEntry<MessageReceived>>,
    signal: AbortSignal,
    stopRequested: () => StopKind | undefined,
    delivery: RunDelivery,
    logger: Logger,
    taken: UnansweredTracker,
    telemetry: RunTrace,
    tools: ToolState,
    unfinishedStep: StepRecord | undefined,
  ): Promise<RunContext> {
    const o = this.o;
    const compaction = this.compaction(ref, signal, logger);
    const history = await compaction.initialPrompt();
    delivery.beginTurn(compaction.answerAnchor);
    return {
      conversationId: ref.conversationId,
      runId: ref.runId,
      attempt,
      fencingToken: ref.token,
      history,
      inputs,
      steering: {
        pull: async (mode) => {
          const pulled = await tracePull(() => o.runs.pullAtBoundary(ref, mode ?? o.steeringMode ?? DEFAULTS.agent.steeringMode));
          compaction.noteRequested(pulled.compactionRequestedSeq);
          const messages = pulled.messages.filter(isMessage);
          taken.add(messages);
          // What follows answers the newest message taken: the anchor a retried attempt reads from the
          // record (its `steering.injected`), so both attempts deliver under the same keys.
          if (pulled.messages.length > 0) delivery.beginTurn(Math.max(...pulled.messages.map((m) => m.seq)));
          return messages;
        },
      },
      state: {
        get: (key) => o.state.get(ref.conversationId, key),
        set: (key, value) => o.state.set(ref, key, value),
      },
      recordStep: async (step) => {
        const messages = step.messages as Array<{ role: 'assistant' | 'tool'; content: unknown }>;
        telemetry.usage(step.usage);
        const seq = await o.runs.append(ref, {
          v: 1,
          kind: 'model.step',
          at: Date.now(),
          run: ref.runId,
          token: ref.token,
          step: 0,
          messages,
          ...(step.finishReason !== undefined && { finishReason: step.finishReason }),
          ...(step.usage !== undefined && { usage: stripUndefined(step.usage) }),
          ...(step.partial && { partial: true }),
        });
        if (isFinalStep({ messages, finishReason: step.finishReason, partial: step.partial })) taken.answered();
        return seq;
      },
      recordToolCalls: (step) =>
        o.runs.append(ref, {
          v: 1,
          kind: 'tool.calls',
          at: Date.now(),
          run: ref.runId,
          token: ref.token,
          step: 0,
          messages: step.messages as Array<{ role: 'assistant' | 'tool'; content: unknown }>,
          ...(step.finishReason !== undefined && { finishReason: step.finishReason }),
          ...(step.usage !== undefined && { usage: stripUndefined(step.usage) }),
        }),
      ...(unfinishedStep && { unfinishedStep }),
      delivery,
      signal,
      stopRequested,
      logger,
      model: o.model,
      compaction,
      fetchAttachment: async (attachment, opts) => {
        const out = o.resolveOutbound(ref.conversationId);
        return out?.fetchAttachment ? out.fetchAttachment(attachment, opts) : undefined;
      },
      toolCalls: tools.journal,
      artifacts: new RedisArtifacts(o.client, o.prefix, ref),
      approvals: new RunApprovals({
        client: o.client,
        prefix: o.prefix,
        run: ref,
        delivery,
        starter: inputs[0]?.sender.id,
        logger,
        usedApprovals: tools.usedApprovals,
        earlierRequests: tools.earlierApprovals,
      }),
    };
  }

  /**
   * What earlier attempts left in `entries` (a takeover's read of the record):
   * the turn's anchor, a recorded final answer, the steered messages taken
   * since the last answer, and the tool-call step an attempt died in.
   */
  private async progress(
    log: string,
    runId: string,
    entries: readonly SeqEntry[],
  ): Promise<{ anchor: number; answer: RecordedAnswer | undefined; unanswered: Array<SeqEntry<MessageReceived>>; unfinishedStep: StepRecord | undefined }> {
    const progress = runProgress(entries, runId);
    const unanswered = progress.unansweredSteered.length > 0 ? (await readSeqs(this.o.client, log, progress.unansweredSteered)).filter(isMessage) : [];
    const calls = progress.unfinishedStep;
    const unfinishedStep: StepRecord | undefined = calls && {
      messages: calls.messages as StepRecord['messages'],
      ...(calls.finishReason !== undefined && { finishReason: calls.finishReason }),
      ...(calls.usage !== undefined && { usage: calls.usage }),
    };
    return { anchor: progress.anchor, answer: progress.answer, unanswered, unfinishedStep };
  }

  /**
   * At the end of one invocation: a failed or stopped one sends the plugin's
   * notice and names the steered messages it took and did not answer (kept in
   * state for `/status`); a completed one clears a note an earlier run left.
   * Returns the note now stored (raw), if any.
   */
  private async settleUnanswered(
    ref: RunRef,
    delivery: RunDelivery,
    outcome: RunOutcome,
    notice: string | undefined,
    unanswered: ReadonlyArray<SeqEntry<MessageReceived>>,
    stored: string | undefined,
    logger: Logger,
  ): Promise<string | undefined> {
    const o = this.o;
    if (outcome === 'completed') {
      if (notice) await delivery.message(notice);
      if (stored === undefined) return undefined;
      try {
        await o.state.delete(ref, UNANSWERED_KEY, { kind: 'equals', raw: stored });
      } catch (err) {
        if (!(err instanceof CasConflictError)) throw err;
      }
      return undefined;
    }
    const note =
      (outcome === 'failed' || outcome === 'stopped') && unanswered.length > 0 ? unansweredNote(ref.runId, outcome, unanswered, Date.now()) : undefined;
    const text = [notice, note && unansweredNotice(note)].filter((t): t is string => !!t).join('\n\n');
    if (note) logger.warn({ seqs: unanswered.map((m) => m.seq), outcome }, 'run ended without answering steered messages it took');
    if (text) await delivery.message(text);
    if (!note) return stored;
    await o.state.set(ref, UNANSWERED_KEY, note);
    return JSON.stringify(note);
  }

  private compaction(ref: RunRef, signal: AbortSignal, logger: Logger): RunCompaction {
    const o = this.o;
    return new RunCompaction({
      client: o.client,
      prefix: o.prefix,
      runs: o.runs,
      state: o.state,
      run: ref,
      contextWindow: o.model.contextWindow - o.model.outputReserve,
      tailEntries: o.historyTailEntries ?? DEFAULTS.compaction.tailEntries,
      settings: o.compaction ?? {},
      calibrator: this.calibrator,
      signal,
      logger,
    });
  }
}

/** The tool journal of one attempt and the approvals its run's calls ran under (shared by every invocation of the attempt). */
interface ToolState {
  journal: RunToolJournal;
  usedApprovals: Set<string>;
  earlierApprovals: ReturnType<typeof earlierApprovalRequests>;
}

/**
 * The attempt's tool state from what earlier attempts recorded (`entries`,
 * empty on a first attempt): calls left unanswered, approvals already acted on.
 * Kept for the whole attempt, so a call a first invocation replayed is not
 * pending again in a continuation.
 */
function toolState(runs: Runs, ref: RunRef, entries: readonly SeqEntry[]): ToolState {
  return {
    journal: new RunToolJournal(runs, ref, pendingToolCalls(entries, ref.runId)),
    usedApprovals: usedApprovals(entries, ref.runId),
    earlierApprovals: earlierApprovalRequests(entries, ref.runId),
  };
}

/** Bookkeeping of the steered messages a run took (pulled or handed back) and the answers that cover them. */
interface UnansweredTracker {
  add(messages: Array<SeqEntry<MessageReceived>>): void;
  /** A final answer was recorded: everything taken so far is answered. */
  answered(): void;
}

function isMessage(e: SeqEntry): e is SeqEntry<MessageReceived> {
  return e.kind === 'message.received';
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
