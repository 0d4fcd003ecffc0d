/** Options of the run executor and how one execution ends. */
import type { Logger } from 'pino';
import type { IdentityStore } from '../../src/people/identity.js';
import type { Runs } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import type { SteeringMode } from '../../src/protocol/types.js';
import type { RunOutcome } from '../../src/record/entries.js';
import type { RedisClient } from '../../src/scripts/index.js';
import type { RunChannels } from '../channels.js';
import type { CompactionSettings } from '../compaction/hooks.js';
import type { RunnerFeature } from '../feature.js';
import type { ModelSettings, RunnerPlugin } from '../plugin.js';
import type { ControlListener } from './control.js';

/** How runs are executed; the runner resolves every default once (runner/main.ts). */
export interface RunSettings {
  /** Worker identity recorded on the run. */
  owner: string;
  /** How long an attempt's lease lasts without a heartbeat, in ms (`runs.leaseMs`). */
  leaseMs: number;
  /** How often an attempt renews its lease, in ms (`runs.heartbeatMs`). */
  heartbeatMs: number;
  /** The model of runs without a profile (`model.*`). */
  model: ModelSettings;
  /** Steering mode of continuations handed back by finish (the plugin's, else `all`). */
  steeringMode: SteeringMode;
  /** Most record entries read to build a prompt (bounded tail), and read by an attempt taking a run over (`compaction.tailEntries`). */
  historyTailEntries: number;
  /** Text sent to the user when a run fails unexpectedly. */
  failureMessage: string;
  /** Follow-up runs in a row a failed run's unanswered messages get before the person is told what was not answered (`runs.followUpsOnFailure`). */
  followUpsOnFailure: number;
  /** Compaction settings (summarizer model, threshold, kept turns). */
  compaction: CompactionSettings;
  /** How long a conversation's outbox lives after its last delivery, in seconds (`runner.outboxTtlSeconds`). */
  outboxTtlSeconds: number;
  /** Acknowledged outbox records kept per conversation (older ones of ended runs go); 0: no count bound (`retention.indexMaxEntries`). */
  outboxMaxEntries: number;
}

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
  /** A conversation's channel id and outbound side. */
  channels: RunChannels;
  /** Resolves senders to identities: the run's accountable identity, `RunContext.features.identities`. */
  identities: IdentityStore;
  logger: Logger;
  settings: RunSettings;
  /** The runner features, in order: a run's profile, what they add to its context, their run hooks. */
  features: readonly RunnerFeature[];
}

/** How one execution ended. `lost`: another attempt owns the run; `aborted`: shutdown, left recoverable. */
export type ExecutionResult = { kind: 'finished'; outcome: RunOutcome; successorId?: string } | { kind: 'lost' } | { kind: 'aborted' };
