/**
 * A feature's part of the runner (app/feature.ts): the agent profile of a
 * run, its handle in each invocation's `RunContext.features`, and hooks before an
 * invocation and after a model step, like middleware. The executor calls
 * every registered feature in order (runner/run/features.ts) and names none
 * of them; the composition registers them (app/features/).
 */
import type { AppContext } from '../src/app-context.js';
import type { CoreConfig } from '../src/config/load.js';
import type { IngestDeps } from '../src/ingest.js';
import type { Logger } from '../src/logger.js';
import type { IdentityStore } from '../src/people/identity.js';
import type { AgentProfile } from '../src/people/profiles.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import type { MessageReceived, RunOutcome, SeqEntry } from '../src/record/entries.js';
import type { RedisClient } from '../src/scripts/index.js';
import type { RunChannels } from './channels.js';
import type { RunFeatures, RunResult, StepRecord } from './plugin.js';

/**
 * Terminal reason of a run a spent budget ended (a feature's `before`, or the
 * `spendingCheck` it adds): its notice says what happens to the messages, so
 * they are not listed again. Stable: dashboards and tests branch on it.
 */
export const BUDGET_REASON = 'budget';

/** What a feature's runner part is made from: the runner's services, made once per runner. */
export interface RunnerFeatureKit {
  config: CoreConfig;
  logger: Logger;
  /** The runner's command connection. */
  redis: RedisClient;
  /** Key prefix (`redis.prefix`). */
  prefix: string;
  /** Who is who across channels. */
  identities: IdentityStore;
  /** The channels runs deliver through (ids, outbound sides, settings). */
  channels: RunChannels;
  /** The clock, ms since the epoch (tests move it). */
  now: () => number;
  /** Ingests inputs the way the host does (a subagent's task goes in through it). */
  ingest: IngestDeps & { dispatch: Dispatch };
  /** Opens a connection of the feature's own (a BullMQ worker's); the feature closes it in its `close`. */
  connectRedis: AppContext['connectRedis'];
  /** BullMQ lock / stalled-check timings for a worker the feature starts, in ms (tests shorten them); undefined: BullMQ's. */
  workerTimings: { lockDurationMs?: number; stalledIntervalMs?: number };
}

/** One invocation of a run, as features see it. */
export interface FeatureRun {
  readonly conversationId: string;
  readonly runId: string;
  /** The run's accountable identity (`accountableIdentity`); undefined: the operator. */
  readonly identity: string | undefined;
  /** The run's agent profile (the `profile` hooks'); undefined: none. */
  readonly profile: AgentProfile | undefined;
  /**
   * Set for a run that works for another conversation's run (a subagent's,
   * named by the `parent` hooks): that conversation's id. Its profile, tool
   * policy and conversation budget apply to this run.
   */
  readonly parentConversationId?: string | undefined;
  /** The message that started the run (a fire's names its `origin`); undefined for a run without one. */
  readonly starter: SeqEntry<MessageReceived> | undefined;
  /** The user messages this invocation answers. */
  readonly inputs: ReadonlyArray<SeqEntry<MessageReceived>>;
  /** The senders of the messages the invocation answers so far, steering it pulled included (fires and events are nobody's). */
  requesters(): string[];
  /**
   * Whether the invocation answers an event so far, steering it pulled included (a subagent's result, an API
   * event): text no person of the conversation wrote.
   */
  answersEvent(): boolean;
}

/** What a feature adds to `RunContext.features`: its own member (`memory`, `schedules`, …). */
export type FeatureContext = Partial<RunFeatures>;

/** One feature's runner part. Every hook is optional: a feature has the parts it needs. */
export interface RunnerFeature {
  /** Unique among the runner's features (logs). */
  readonly name: string;
  /**
   * The conversation a run in `conversationId` works for, when it is another
   * conversation's (a subagent's parent), from the input that started the
   * run (`starter`); asked once per attempt, before `profile`, and the first
   * feature naming one wins. Only the runtime's own writes may decide it,
   * never text a person or a model wrote.
   */
  parent?(conversationId: string, starter: SeqEntry<MessageReceived> | undefined): string | undefined;
  /**
   * The agent profile of a run, asked once per attempt; the first feature
   * naming one wins. `parentConversationId`: the conversation the run works
   * for (the `parent` hooks'), whose profile it runs under.
   */
  profile?(conversationId: string, identity: string | undefined, parentConversationId?: string): AgentProfile | undefined;
  /**
   * Before each invocation of the plugin: a result ends the run instead (the
   * first feature returning one wins). `newRun`: the first invocation of the
   * run's first attempt (not a takeover, not a continuation).
   */
  before?(run: FeatureRun, newRun: boolean): Promise<RunResult | undefined>;
  /**
   * What the feature adds to the invocation's `RunContext.features`: a member it
   * sets replaces the runtime's and an earlier feature's; `spendingCheck`s all run.
   */
  context?(run: FeatureRun): FeatureContext;
  /** After a model step, as the plugin records it (before it is appended: a throw fails `record.step`). */
  afterStep?(run: FeatureRun, step: StepRecord): Promise<void>;
  /**
   * After a model call the plugin recorded no step for (`RunRecord.spent`:
   * cut off before it said anything, silent, failed), with the usage the
   * plugin estimates the provider bills for it; and after each compaction
   * summarizer call of the run, with its usage (reported, or estimated for a
   * failed call). A throw fails `record.spent`, or that compaction.
   */
  spent?(run: FeatureRun, usage: NonNullable<StepRecord['usage']>): Promise<void>;
  /**
   * After the run ended, its end recorded (`outcome`: how). Once per run on
   * the runner that ended it; a runner that dies first leaves it undone. A
   * throw is logged, never fails the run.
   */
  ended?(run: EndedRun, outcome: RunOutcome): Promise<void>;
  /** When the runner stops, after its runs ended: closes what the feature opened. A throw is logged. */
  close?(): Promise<void>;
}

/** A run that ended, as the `ended` hook sees it. */
export type EndedRun = Pick<FeatureRun, 'conversationId' | 'runId' | 'identity'>;

/** Makes a feature's runner part. */
export type RunnerFeatureFactory = (kit: RunnerFeatureKit) => RunnerFeature | Promise<RunnerFeature>;
