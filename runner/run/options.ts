/** Options of the run executor and how one execution ends. */
import type { Logger } from 'pino';
import type { Budgets } from '../../src/people/budget.js';
import type { IdentityStore } from '../../src/people/identity.js';
import type { MemoryStore } from '../../src/people/memory.js';
import type { Profiles } from '../../src/people/profiles.js';
import type { Runs } from '../../src/protocol/runs.js';
import type { ConversationState } from '../../src/protocol/state.js';
import type { SteeringMode } from '../../src/protocol/types.js';
import type { RunOutcome } from '../../src/record/entries.js';
import type { Schedules } from '../../src/schedules/schedules.js';
import type { RedisClient } from '../../src/scripts/index.js';
import type { CompactionSettings } from '../compaction/hooks.js';
import type { OutboundResolver } from '../delivery/sink.js';
import type { ModelSettings, RunnerPlugin } from '../plugin.js';
import type { ControlListener } from './control.js';

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
  /** Follow-up runs in a row a failed run's unanswered messages get before the person is told what was not answered. Default 2. */
  followUpsOnFailure?: number;
  /** Compaction settings (summarizer model, threshold, kept turns). */
  compaction?: CompactionSettings;
  /** How long a conversation's outbox lives after its last delivery, in seconds. Default 604 800 (7 days). */
  outboxTtlSeconds?: number;
  /** Resolves senders to identities (`RunContext.identities`). Default: none (the context has no `identities`). */
  identities?: IdentityStore;
  /** The channel id of a conversation. Default: the conversation id up to its first `:`. */
  resolveChannel?(conversationId: string): string | undefined;
  /** The channel's configured `admins` (sender ids) of a conversation, for the schedule tools' group rule. Default: none (the platform's chat admins only). */
  chatAdmins?(conversationId: string): readonly string[] | undefined;
  /** Acknowledged outbox records kept per conversation (older ones of ended runs go); 0: no count bound. Default 100. */
  outboxMaxEntries?: number;
  /** The schedules service: runs get `RunContext.schedules` for their conversation. Default: none (schedules off). */
  schedules?: Schedules;
  /** Long-term memory per identity (`memory.*`): runs with an identity get `RunContext.memory`. Default: none (memory off). */
  memory?: MemoryStore;
  /** Spending budgets (`budgets.*`). Default: none. */
  budgets?: Budgets;
  /** Agent profiles and their bindings (`profiles`, `bindings`). Default: the base settings for every run. */
  profiles?: Profiles;
  /** The clock, ms since the epoch (budget windows and notices). Default `Date.now`. */
  now?: () => number;
}

/** How one execution ended. `lost`: another attempt owns the run; `aborted`: shutdown, left recoverable. */
export type ExecutionResult = { kind: 'finished'; outcome: RunOutcome; successorId?: string } | { kind: 'lost' } | { kind: 'aborted' };
