/** Plain types of the dispatch protocol (no zod inside). */

import type { InputPolicy } from '../config/input-policies.js';
import type { Attachment, InputOrigin, Sender } from '../record/entries.js';

/** How a message that arrives during a run is handled (see the README's dispatch table), and every policy in documentation order. */
export { INPUT_POLICIES, type InputPolicy } from '../config/input-policies.js';

/** Kinds of stop request a run can receive. */
export type StopKind = 'interrupt' | 'supersede' | 'stop';

/** How much steering one pull takes. */
export type SteeringMode = 'all' | 'one';

/** A normalized incoming message, as a channel plugin hands it to ingest. */
export interface IncomingMessage {
  /** `<channel id>:<chat id>[:<thread id>]`. */
  conversationId: string;
  /** `<channel id>:<platform update identity>`; the dedupe identity. */
  updateKey: string;
  sender: Sender;
  /** Message text (may be empty when there are attachments). */
  text: string;
  /** Platform message id, for replies. */
  messageId?: string;
  replyTo?: { messageId: string; text?: string };
  attachments?: Attachment[];
  metadata?: Record<string, unknown>;
  /** Set for an input that is not a user's message (`ingestEvent`); channels never set it (the host strips it). */
  origin?: InputOrigin;
  /**
   * Sent in a group chat (several people share the conversation): recorded, so
   * the prompt names each message's sender and a run gets no personal memory
   * unless its profile allows it (docs/people.md#in-groups). Default false (1:1).
   */
  group?: boolean;
}

/** What ingest did with an update. */
export type IngestResult =
  | { kind: 'duplicate'; seq: number }
  | { kind: 'new-run'; seq: number; runId: string }
  | { kind: 'joined'; seq: number; runId: string }
  | { kind: 'steered'; seq: number; runId: string; depth: number }
  /** `policy`: followup/collect wait for a successor; `overflow`: the steering list was full; `order`: older messages already wait in pending, so this one queues behind them. */
  | { kind: 'pending'; seq: number; runId: string; depth: number; reason: 'policy' | 'overflow' | 'order' }
  | { kind: 'interrupting'; seq: number; runId: string; stop: StopKind }
  /** Over a rate limit (`ProtocolOptions.rateLimit`): recorded as `message.refused`, no run; `retryAfterMs` until the empty bucket has a token. */
  | { kind: 'refused'; seq: number; limit: 'user' | 'conversation'; retryAfterMs: number }
  /** The conversation was purged and its tombstone refuses updates. */
  | PurgedResult;

/**
 * An update (message or control command) refused because its conversation was
 * purged and the tombstone refuses updates (`afterPurge: 'refuse'`): nothing
 * recorded (`seq` is always 0); only the update's dedupe key is set, so a
 * redelivery is a duplicate.
 */
export interface PurgedResult {
  kind: 'purged';
  seq: 0;
}

/** A run taken by a worker. */
export interface AcquiredRun {
  conversationId: string;
  runId: string;
  /** Fencing token: every later write of the run carries it. */
  token: number;
  /** 1 on the first attempt, more after a takeover. */
  attempt: number;
  /** Seqs of the messages the run was created for. */
  inputs: number[];
  /** A stop already requested for the run (e.g. /stop before it started). */
  stop: StopKind | undefined;
  /** Lease expiry, ms since the epoch on the Redis clock. */
  leaseUntilMs: number;
  /** Why the run exists: a message (`ingest`), a predecessor's pending messages (`successor`), or `/compact` when idle (`compact`, no inputs). */
  cause: 'ingest' | 'successor' | 'compact';
  /** Failed runs in a row whose unanswered messages this run was created to answer (a follow-up); 0 for any other run. */
  failures: number;
  /** What `acquire` was asked to read in its own call (`AcquireReads`), as the run was acquired. */
  read?: AcquiredReads;
}

/** What `acquire` read in its own call. */
export interface AcquiredReads {
  /** The input messages' entries, in input order (a kind of a newer release skipped); not read for more than 256 inputs (the script's work stays bounded). */
  inputs?: import('../record/entries.js').SeqEntry[];
  /** The state fields' values, in the order asked (undefined: unset). */
  state: Array<string | undefined>;
  /** The meta fields' values, in the order asked. */
  meta: Array<string | undefined>;
}

/** Result of `finish`. */
export type FinishResult =
  | { kind: 'continue'; messages: import('../record/entries.js').SeqEntry[] }
  | { kind: 'ended'; successor: { runId: string; inputs: number[] } | undefined };

/** Snapshot for /status. */
export interface ConversationStatus {
  activeRunId: string | undefined;
  runState: 'queued' | 'running' | undefined;
  stop: StopKind | undefined;
  steeringDepth: number;
  pendingDepth: number;
  policyOverride: InputPolicy | undefined;
  effectivePolicy: InputPolicy | undefined;
  lastSeq: number;
  resetSeq: number;
  attempt: number;
  owner: string | undefined;
  leaseUntilMs: number;
  /** Seq of a `/compact` not yet applied (0 when none; cleared by the next compaction). */
  compactionRequestedSeq: number;
  /** The compaction circuit breaker's state (JSON from `runner.compaction.breaker`), when one was written. */
  compactionBreaker: string | undefined;
}
