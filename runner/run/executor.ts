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
 * again) instead of asking the model again. Messages a failed run took and
 * did not answer go to a follow-up run (a bounded number in a row); after
 * the last, and for steering a stopped run took, they are named in the
 * message the user gets and kept for `/status`.
 *
 * The steps live in modules with one job each: the attempt (acquire, lease,
 * stop requests: attempt.ts), what it starts from (inputs, takeover:
 * start.ts), compact-only runs (compact-only.ts), the invocation's
 * context (context.ts), finish and hand-back (finish.ts), the
 * unanswered messages (unanswered.ts), and the runner features' hooks (features.ts).
 */

import { RunEndedError, StaleRunError } from '../../src/errors.js';
import type { AgentProfile } from '../../src/people/profiles.js';
import type { StopKind } from '../../src/protocol/types.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { RunTrace } from '../../src/telemetry/run-trace.js';
import { Calibrator } from '../compaction/estimate.js';
import { RunCompaction } from '../compaction/hooks.js';
import type { SummaryUsage } from '../compaction/summarize.js';
import { BUDGET_REASON } from '../feature.js';
import type { RunResult, StepRecord } from '../plugin.js';
import { accountableIdentity } from './accountable.js';
import { RunAttempt } from './attempt.js';
import { compactOnly, compactRequester } from './compact-only.js';
import { createRunContext } from './context.js';
import { featureParent, featureProfile, featuresBefore, featuresEnded, featuresSpent, InvocationRun } from './features.js';
import { finishRun } from './finish.js';
import type { ExecutionResult, ExecutorOptions } from './options.js';
import { type AttemptStart, readAttemptStart } from './start.js';
import type { RecordedAnswer } from './takeover.js';
import { UnansweredMessages } from './unanswered.js';

export type { ExecutionResult } from './options.js';

const OUTCOME_OF_STOP: Record<StopKind, RunOutcome> = { interrupt: 'interrupted', supersede: 'superseded', stop: 'stopped' };

/** The failure message runs send unless the runner is given another (`RunSettings.failureMessage`). */
export const DEFAULT_FAILURE_MESSAGE = 'Sorry, something went wrong while answering. Please try again.';

/**
 * What the next invocation of an attempt does besides answering its inputs: deliver a recorded answer, finish a
 * recorded tool-call step, or end with the result a feature refused a `/compact` run with (nothing else run).
 */
interface Carried {
  recorded: RecordedAnswer | undefined;
  unfinished: StepRecord | undefined;
  refused?: RunResult | undefined;
}

/** What one invocation of an attempt answers, and the run's parts it shares with the attempt's other invocations. */
interface Invocation {
  inputs: Array<SeqEntry<MessageReceived>>;
  unanswered: UnansweredMessages;
  telemetry: RunTrace;
  tools: AttemptStart['tools'];
  /** The attempt's first invocation. */
  first: boolean;
  /** The message that started the run. */
  starter: SeqEntry<MessageReceived> | undefined;
  identity: string | undefined;
  /** The conversation the run works for (a subagent's parent); undefined: its own. */
  parentConversationId: string | undefined;
  profile: AgentProfile | undefined;
  /** The `/model` choice as the attempt started: its conversation's (read with its prompt head), or the parent's. */
  modelChoice: string | undefined;
  compaction: RunCompaction;
  /** The invocation as features see it. */
  run: InvocationRun;
}

/** Whom an attempt answers for and how: the parts of an `Invocation` read once per attempt. */
type RunScope = Pick<Invocation, 'identity' | 'parentConversationId' | 'profile' | 'modelChoice'>;

/** Runs one run end to end. */
export class RunExecutor {
  private readonly active = new Map<string, RunAttempt>();
  // Learns each conversation's provider-tokens / estimated-tokens ratio from observed usage.
  private readonly calibrator = new Calibrator();

  constructor(private readonly o: ExecutorOptions) {}

  /** Number of runs executing now. */
  get inFlight(): number {
    return this.active.size;
  }

  /** Aborts every executing run without finishing it (shutdown); they stay recoverable from Redis. */
  abortAll(): number {
    for (const attempt of this.active.values()) attempt.abort('shutdown');
    return this.active.size;
  }

  /**
   * Acquires and executes the run. Throws LeaseHeldError (retry later),
   * RunEndedError / RunNotFoundError (nothing to do) from acquire.
   */
  async execute(conversationId: string, runId: string): Promise<ExecutionResult> {
    // The `run` span and run metrics (src/telemetry/run-trace.ts): begun once the inputs are read, ended here.
    const telemetry = new RunTrace(this.o.settings.model.name);
    try {
      return telemetry.ended(await this.executeAttempt(conversationId, runId, telemetry));
    } catch (err) {
      telemetry.threw(err);
      throw err;
    }
  }

  private async executeAttempt(conversationId: string, runId: string, telemetry: RunTrace): Promise<ExecutionResult> {
    const attempt = await RunAttempt.open(this.o, conversationId, runId);
    this.active.set(runId, attempt);
    try {
      return await this.run(attempt, telemetry);
    } catch (err) {
      if (err instanceof StaleRunError || err instanceof RunEndedError) {
        attempt.logger.warn({ err }, 'run lost to another attempt; stopping');
        return { kind: 'lost' };
      }
      throw err;
    } finally {
      attempt.close();
      this.active.delete(runId);
    }
  }

  /** The attempt's sequence: read its start, compact first when `/compact` made it, then invoke and finish until the run ends. */
  private async run(attempt: RunAttempt, telemetry: RunTrace): Promise<ExecutionResult> {
    const { acquired, ref, logger } = attempt;
    logger.info({ inputs: acquired.inputs }, 'run started');
    const start = await readAttemptStart(this.o, attempt);
    telemetry.begin({ ...ref, attempt: acquired.attempt, token: acquired.token, cause: acquired.cause }, start.inputs);
    const unanswered = new UnansweredMessages(this.o.state, ref, logger, start.note, start.inputs, attempt.delivery.reactions);
    const carried = this.takeOver(attempt, start, unanswered);
    unanswered.showTaken();
    // Every summarizer call is charged like a model step, to the invocation under way (its accountable subjects).
    let invocation: InvocationRun | undefined;
    const charge = (usage: SummaryUsage) => featuresSpent(this.o.features, invocation ?? unreachable(), usage);
    // The first invocation's record read goes out now, beside the identity read below. A compact-only run
    // reads its prompt after compacting; a recorded answer or a stop already asked for needs no prompt.
    const compaction = this.compaction(attempt, charge);
    if (acquired.cause !== 'compact' && !carried.recorded && !attempt.stopKind) compaction.preload(start.head);
    const starter = start.inputs[0];
    // A `/compact` run without inputs answers to whoever asked for it.
    const requester = acquired.cause === 'compact' && !starter ? await compactRequester(this.o, ref.conversationId, start.head.compactRequested) : undefined;
    const scope = await this.scope(ref.conversationId, starter, start.head.modelChoice, requester);
    let inputs = start.inputs;
    if (acquired.cause === 'compact' && !attempt.stopKind) {
      invocation = this.invocationRun(attempt, scope, starter, inputs);
      const after = await compactOnly(this.o, attempt, this.compaction(attempt, charge), invocation);
      if (after?.kind === 'ended') return after.result;
      if (after?.kind === 'refused') carried.refused = after.result;
      else if (after) unanswered.add((inputs = after.inputs));
    }
    for (let first = true; ; first = false) {
      invocation = this.invocationRun(attempt, scope, starter, inputs);
      const parts = { inputs, unanswered, telemetry, tools: start.tools, first, starter, run: invocation, ...scope };
      const result = await this.invoke(attempt, { ...parts, compaction: first ? compaction : this.compaction(attempt, charge) }, carried);
      const interrupted = attempt.interruption();
      if (interrupted) return interrupted;
      const outcome = attempt.stopKind ? OUTCOME_OF_STOP[attempt.stopKind] : result.outcome;
      const retry = this.followUp(attempt, outcome, result, unanswered);
      if (retry.length === 0) await this.settle(attempt, outcome, result, unanswered);
      else unanswered.showAnswered();
      const after = await finishRun(this.o, attempt, outcome, result.reason ?? '', retry);
      if (after.kind === 'ended') {
        await featuresEnded(this.o.features, { conversationId: ref.conversationId, runId: ref.runId, identity: scope.identity }, outcome, logger);
        return after.result;
      }
      unanswered.add((inputs = after.inputs));
    }
  }

  /**
   * The run's accountable identity (the person whose message started it, or a
   * fire's owner: budgets, profile bindings and memory follow it), the
   * conversation it works for when a feature names one (a subagent's parent,
   * from the runtime's own record of its task), and its profile and `/model`
   * choice: the parent's for such a run, so a child never gets more than the
   * run that started it. `requester`: who asked for a run without a starter (a `/compact` run's), accountable for it.
   */
  private async scope(
    conversationId: string,
    starter: SeqEntry<MessageReceived> | undefined,
    ownChoice: string | undefined,
    requester?: Pick<MessageReceived, 'sender'>,
  ): Promise<RunScope> {
    const parentConversationId = featureParent(this.o.features, conversationId, starter);
    const [identity, modelChoice] = await Promise.all([
      accountableIdentity(starter ?? requester, (userId) => this.identityOf(conversationId, userId), this.currentIdentity),
      parentConversationId === undefined ? ownChoice : this.modelChoiceOf(parentConversationId),
    ]);
    const profile = featureProfile(this.o.features, conversationId, identity, parentConversationId);
    return { identity, parentConversationId, profile, modelChoice };
  }

  /** A conversation's `/model` choice (meta `model`); undefined: none. */
  private async modelChoiceOf(conversationId: string): Promise<string | undefined> {
    return (await this.o.client.hget(conversationKeys(this.o.prefix, conversationId).meta, 'model')) ?? undefined;
  }

  /**
   * The seqs a failed run hands to a follow-up run: every message it took and
   * did not answer, unless follow-ups are used up or the failure is `final`
   * (a follow-up would fail the same way). The person hears nothing of this
   * failure: the follow-up answers, or the last one says what was not answered.
   */
  private followUp(attempt: RunAttempt, outcome: RunOutcome, result: RunResult, unanswered: UnansweredMessages): number[] {
    if (outcome !== 'failed' || result.final) return [];
    if (attempt.acquired.failures >= this.o.settings.followUpsOnFailure) return [];
    const seqs = unanswered.seqs();
    if (seqs.length > 0) {
      attempt.logger.warn(
        { seqs, reason: result.reason, failures: attempt.acquired.failures + 1 },
        'run failed; handing its unanswered messages to a follow-up run',
      );
    }
    return seqs;
  }

  /** Tells the person how the invocation ended (the plugin's notice, what was not answered). */
  private settle(attempt: RunAttempt, outcome: RunOutcome, result: RunResult, unanswered: UnansweredMessages): Promise<void> {
    // A spent budget's notice says what happens to the messages; /status names them.
    const listInMessage = result.reason !== BUDGET_REASON;
    return unanswered.settle(attempt.delivery, outcome, result.notice, { listInMessage, tries: attempt.acquired.failures + 1 });
  }

  /** What a takeover carries into the attempt: the delivery anchor, the messages taken and not answered, a recorded answer or tool-call step. */
  private takeOver(attempt: RunAttempt, start: AttemptStart, unanswered: UnansweredMessages): Carried {
    const { takeover } = start;
    if (!takeover) return { recorded: undefined, unfinished: undefined };
    // Keys of anything sent before a plugin runs (a recorded answer, a notice) are the earlier attempt's.
    attempt.delivery.beginTurn(takeover.anchor);
    unanswered.takenOver(takeover.inputsAnswered, takeover.unanswered);
    attempt.logger.info(
      {
        recordedAnswer: takeover.answer?.stepSeq,
        unansweredSteered: takeover.unanswered.map((m) => m.seq),
        unfinishedStep: takeover.unfinishedStep !== undefined,
      },
      'taking over the run',
    );
    return { recorded: takeover.answer, unfinished: takeover.unfinishedStep };
  }

  /**
   * One invocation: delivers the answer an earlier attempt recorded, or hands
   * a RunContext to the plugin (unless a stop was requested). A plugin that
   * throws fails the run (with the failure message, unless it was aborted).
   */
  private async invoke(attempt: RunAttempt, p: Invocation, carried: Carried): Promise<RunResult> {
    const { delivery, logger } = attempt;
    if (carried.refused) {
      const refused = carried.refused;
      carried.refused = undefined;
      return refused;
    }
    const recorded = carried.recorded;
    if (recorded) {
      // The turn is answered in the record; an earlier attempt died before (or while) delivering it.
      // Asking the model again would answer an answered prompt: deliver what was recorded.
      carried.recorded = undefined;
      logger.info({ stepSeq: recorded.stepSeq }, 'delivering the answer an earlier attempt recorded, without calling the model');
      if (recorded.text.trim()) await delivery.message(recorded.text);
      return { outcome: 'completed' };
    }
    if (attempt.stopKind) return { outcome: 'completed' };
    const { run } = p;
    // Only a new run's first invocation is `newRun` (features count a run once): not a takeover's, not a continuation's,
    // not a `/compact` run's (admitted before it compacted).
    const spent = await featuresBefore(this.o.features, run, p.first && attempt.acquired.attempt === 1 && attempt.acquired.cause !== 'compact');
    if (spent) return spent;
    delivery.typing();
    const ctx = await createRunContext(this.o, attempt, { ...p, run, unfinishedStep: carried.unfinished });
    carried.unfinished = undefined;
    try {
      return await this.o.plugin.run(ctx);
    } catch (err) {
      if (err instanceof StaleRunError) throw err;
      const aborted = attempt.signal.aborted;
      if (!aborted) logger.error({ err }, 'runner plugin threw');
      return { outcome: 'failed', reason: 'runner plugin error', ...(!aborted && { notice: this.o.settings.failureMessage }) };
    }
  }

  /** The identity of a conversation's user (see `IdentityStore.tryResolve`): none for a user id no identity can be made of. */
  private readonly identityOf = (conversationId: string, userId: string): Promise<string | undefined> => {
    return this.o.identities.tryResolve(this.o.channels.channelOf(conversationId), userId);
  };

  /** An identity as it is now: a link may have merged it into another since it was recorded. */
  private readonly currentIdentity = (identity: string): Promise<string> => this.o.identities.resolveAccount(identity);

  /** The invocation as features see it: whom the run answers for, and `inputs`. */
  private invocationRun(attempt: RunAttempt, scope: RunScope, starter: SeqEntry<MessageReceived> | undefined, inputs: Array<SeqEntry<MessageReceived>>) {
    const { conversationId, runId } = attempt.ref;
    const { identity, profile, parentConversationId } = scope;
    return new InvocationRun({ conversationId, runId, identity, profile, parentConversationId, starter, inputs });
  }

  /** The compaction of one invocation; `charge`: charges a summarizer call's usage. */
  private compaction(attempt: RunAttempt, charge: (usage: SummaryUsage) => Promise<void>): RunCompaction {
    const o = this.o;
    return new RunCompaction({
      client: o.client,
      prefix: o.prefix,
      runs: o.runs,
      state: o.state,
      run: attempt.ref,
      contextWindow: o.settings.model.contextWindow - o.settings.model.outputReserve,
      tailEntries: o.settings.historyTailEntries,
      settings: o.settings.compaction,
      calibrator: this.calibrator,
      signal: attempt.signal,
      charge,
      logger: attempt.logger,
    });
  }
}

/** A summarizer call outside an invocation: compaction runs only inside one. */
function unreachable(): never {
  throw new Error('a summarizer call outside an invocation has no run to charge');
}
