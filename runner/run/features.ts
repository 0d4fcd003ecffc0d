/** Calls the runner features' hooks (runner/feature.ts) in the order they were registered. */

import type { Logger } from '../../src/logger.js';
import type { AgentProfile } from '../../src/people/profiles.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import type { EndedRun, FeatureContext, FeatureRun, RunnerFeature } from '../feature.js';
import type { RunResult, StepRecord } from '../plugin.js';

/** One invocation as features see it; the context's steering pulls add their senders (`took`). */
export class InvocationRun implements FeatureRun {
  readonly conversationId: string;
  readonly runId: string;
  readonly identity: string | undefined;
  readonly profile: AgentProfile | undefined;
  readonly parentConversationId: string | undefined;
  readonly starter: SeqEntry<MessageReceived> | undefined;
  readonly inputs: Array<SeqEntry<MessageReceived>>;
  private readonly senders = new Set<string>();
  private event = false;

  constructor(run: Omit<FeatureRun, 'inputs' | 'requesters' | 'answersEvent'> & { inputs: Array<SeqEntry<MessageReceived>> }) {
    this.conversationId = run.conversationId;
    this.runId = run.runId;
    this.identity = run.identity;
    this.profile = run.profile;
    this.parentConversationId = run.parentConversationId;
    this.starter = run.starter;
    this.inputs = run.inputs;
    this.took(run.inputs);
  }

  /** Adds the senders of `messages` the invocation took (fires and events are nobody's), and notes an event. */
  took(messages: ReadonlyArray<SeqEntry<MessageReceived>>): void {
    for (const m of messages) {
      if (!m.origin) this.senders.add(m.sender.id);
      else if (m.origin.kind === 'event') this.event = true;
    }
  }

  /** The senders taken so far. */
  requesters(): string[] {
    return [...this.senders];
  }

  /** Whether an event was taken so far. */
  answersEvent(): boolean {
    return this.event;
  }
}

/** The conversation the run works for when it is another's (a subagent's parent): the first feature's that names one. */
export function featureParent(features: readonly RunnerFeature[], conversationId: string, starter: SeqEntry<MessageReceived> | undefined): string | undefined {
  for (const f of features) {
    const parent = f.parent?.(conversationId, starter);
    if (parent !== undefined) return parent;
  }
  return undefined;
}

/** The run's agent profile: the first feature's that names one. */
export function featureProfile(
  features: readonly RunnerFeature[],
  conversationId: string,
  identity: string | undefined,
  parentConversationId?: string,
): AgentProfile | undefined {
  for (const f of features) {
    const profile = f.profile?.(conversationId, identity, parentConversationId);
    if (profile) return profile;
  }
  return undefined;
}

/** Before an invocation: the first result a feature ends the run with, else undefined. */
export async function featuresBefore(features: readonly RunnerFeature[], run: FeatureRun, newRun: boolean): Promise<RunResult | undefined> {
  for (const f of features) {
    const result = await f.before?.(run, newRun);
    if (result) return result;
  }
  return undefined;
}

/**
 * What the features add to an invocation's `RunContext.features`: each member
 * a feature sets, a later feature's replacing an earlier one's; several
 * `spendingCheck`s run in order, the first result wins.
 */
export function featuresContext(features: readonly RunnerFeature[], run: FeatureRun): FeatureContext {
  const added: FeatureContext = {};
  const checks: Array<NonNullable<FeatureContext['spendingCheck']>> = [];
  for (const f of features) {
    const c = f.context?.(run);
    if (!c) continue;
    const { spendingCheck, ...members } = c;
    // A member a feature leaves undefined does not erase an earlier one's (or the runtime's).
    for (const [name, member] of Object.entries(members)) if (member !== undefined) Object.assign(added, { [name]: member });
    if (spendingCheck) checks.push((spend) => spendingCheck.call(c, spend));
  }
  if (checks.length > 0) {
    added.spendingCheck = async (spend) => {
      for (const check of checks) {
        const result = await check(spend);
        if (result) return result;
      }
      return undefined;
    };
  }
  return added;
}

/** After a model step: every feature's `afterStep`, in order. */
export async function featuresAfterStep(features: readonly RunnerFeature[], run: FeatureRun, step: StepRecord): Promise<void> {
  for (const f of features) await f.afterStep?.(run, step);
}

/** After a model call that recorded no step: every feature's `spent`, in order. */
export async function featuresSpent(features: readonly RunnerFeature[], run: FeatureRun, usage: NonNullable<StepRecord['usage']>): Promise<void> {
  for (const f of features) await f.spent?.(run, usage);
}

/** After a run ended: every feature's `ended`, in order; a throw is logged and the next one still runs. */
export async function featuresEnded(features: readonly RunnerFeature[], run: EndedRun, outcome: RunOutcome, logger: Logger): Promise<void> {
  for (const f of features) {
    try {
      await f.ended?.(run, outcome);
    } catch (err) {
      logger.warn({ err, feature: f.name }, 'a feature failed after the run ended');
    }
  }
}
