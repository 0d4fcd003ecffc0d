/**
 * The runner half of the protocol: acquire, lease, fenced appends, steering
 * pulls and finish. Every write after acquire carries the run's fencing
 * token; a stale token is refused with StaleRunError and writes nothing.
 */
import { DEFAULTS } from '../config/defaults.js';
import { InvalidInputError, RecordError } from '../errors.js';
import { type RecordEntry, type RunOutcome, recordEntrySchema, type SeqEntry } from '../record/entries.js';
import { parseEntry } from '../record/read.js';
import { assertRunId, conversationKeys } from '../redis/keys.js';
import { runScript, type ScriptReply } from '../scripts/index.js';
import { checkReply, pairsFrom, seqList } from '../scripts/results.js';
import { newRunId } from './ids.js';
import { type ProtocolOptions, type ResolvedProtocolOptions, resolveOptions } from './options.js';
import { retainConversation, retentionActive } from './retention.js';
import type { AcquiredReads, AcquiredRun, FinishResult, SteeringMode, StopKind } from './types.js';

/** Identifies one acquired attempt of a run. */
export interface RunRef {
  conversationId: string;
  runId: string;
  /** Fencing token returned by acquire. */
  token: number;
}

/** Fields `acquire` reads in its own call: conversation state fields and meta fields. */
export interface AcquireReads {
  state: readonly string[];
  meta: readonly string[];
}

/** What `acquire` read with `reads`: the input entries (parsed; throws RecordError for a missing or bad one; none read for more than 256 inputs) and the fields' values. */
function acquiredReads(inputs: readonly number[], reply: ScriptReply): AcquiredReads {
  const r = reply as unknown[];
  const entries = r[9] as string[] | null;
  const field = (v: unknown) => (v === null || v === undefined ? undefined : String(v));
  return {
    ...(entries && {
      inputs: inputs.flatMap((seq, i) => {
        const json = entries[i];
        if (!json) throw new RecordError(`record entry ${seq} is missing`);
        return parseEntry(seq, json) ?? [];
      }),
    }),
    state: ((r[10] ?? []) as unknown[]).map(field),
    meta: ((r[11] ?? []) as unknown[]).map(field),
  };
}

/** Entry kinds a runner may append itself; the rest are written by the scripts (a `compaction` with its checkpoint: `ConversationState.commitCompaction`). */
const RUNNER_KINDS = new Set<RecordEntry['kind']>(['model.step', 'tool.calls', 'tool.started', 'tool.completed']);

/** Acquire, heartbeat, append, pull and finish (runner side). */
export class Runs {
  readonly options: ResolvedProtocolOptions;

  constructor(options: ProtocolOptions) {
    this.options = resolveOptions(options);
  }

  /**
   * Takes a queued run (or a running one whose lease expired) for `owner`.
   * With `reads`, the same call also reads what the attempt starts from (the
   * input entries, conversation state and meta fields): no round trip after it.
   * Throws RunNotFoundError, RunEndedError, or LeaseHeldError (retry after `leaseUntilMs`).
   */
  acquire(
    conversationId: string,
    runId: string,
    owner: string,
    leaseMs: number | undefined,
    reads: AcquireReads,
  ): Promise<AcquiredRun & { read: AcquiredReads }>;
  acquire(conversationId: string, runId: string, owner: string, leaseMs?: number): Promise<AcquiredRun>;
  async acquire(conversationId: string, runId: string, owner: string, leaseMs = this.options.leaseMs, reads?: AcquireReads): Promise<AcquiredRun> {
    const k = conversationKeys(this.options.prefix, conversationId);
    const extra = reads ? [reads.state.length, ...reads.state, ...reads.meta] : [];
    const r = checkReply(
      'acquire',
      await runScript(this.options.client, 'acquire', [k.run(runId), k.log, k.meta, k.active, k.inputs(runId)], [runId, owner, leaseMs, ...extra]),
      runId,
    );
    const inputs = seqList(r[3]);
    return {
      conversationId,
      runId,
      token: Number(r[1]),
      attempt: Number(r[2]),
      inputs,
      stop: (r[4] === '' ? undefined : r[4]) as StopKind | undefined,
      leaseUntilMs: Number(r[5]),
      cause: r[7] === 'compact' || r[7] === 'successor' ? r[7] : 'ingest',
      failures: Number(r[8] ?? 0),
      ...(reads && { read: acquiredReads(inputs, r) }),
    };
  }

  /** Extends the lease; returns its new expiry and any stop requested meanwhile. */
  async heartbeat(run: RunRef, leaseMs = this.options.leaseMs): Promise<{ leaseUntilMs: number; stop: StopKind | undefined }> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const r = checkReply('heartbeat', await runScript(this.options.client, 'heartbeat', [k.run(run.runId)], [run.token, leaseMs]), run.runId);
    return { leaseUntilMs: Number(r[1]), stop: (r[2] === '' ? undefined : r[2]) as StopKind | undefined };
  }

  /**
   * Appends a runner-written entry (`model.step`, `compaction`) to the record.
   * The entry is validated first; a bad one throws InvalidInputError and writes nothing.
   */
  async append(run: RunRef, entry: RecordEntry): Promise<number> {
    if (!RUNNER_KINDS.has(entry.kind)) throw new InvalidInputError(`runners may not append ${entry.kind} entries`);
    const parsed = recordEntrySchema.safeParse(entry);
    if (!parsed.success) {
      throw new InvalidInputError(`bad ${entry.kind} entry: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    }
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const r = checkReply(
      'append',
      await runScript(this.options.client, 'append', [k.run(run.runId), k.log, k.meta], [run.token, JSON.stringify(parsed.data)]),
      run.runId,
    );
    return Number(r[1]);
  }

  /**
   * Takes steering at a turn boundary: all waiting messages (`all`) or the
   * first (`one`). Returns [] when none wait or a stop was requested.
   */
  async pull(run: RunRef, mode: SteeringMode = 'all'): Promise<SeqEntry[]> {
    return (await this.pullAtBoundary(run, mode)).messages;
  }

  /**
   * `pull`, plus the seq of a `/compact` not yet applied (0 when none), read
   * in the same script: everything a turn boundary needs in one round trip.
   */
  async pullAtBoundary(run: RunRef, mode: SteeringMode = 'all'): Promise<{ messages: SeqEntry[]; compactionRequestedSeq: number }> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const r = checkReply(
      'pull',
      await runScript(this.options.client, 'pull', [k.run(run.runId), k.steer(run.runId), k.log, k.meta], [run.token, mode, run.runId]),
      run.runId,
    );
    return { messages: entriesFrom(r), compactionRequestedSeq: Number(r[2 + 2 * Number(r[1])] || 0) };
  }

  /**
   * Finishes the run. A `completed` run with steering waiting continues
   * (`continue` carries the messages); otherwise the run ends, unpulled
   * steering is requeued, and a successor is created when messages wait.
   * A `failed` run may hand the messages it took and did not answer to a
   * follow-up (`retry`): the successor takes them first, and its
   * `AcquiredRun.failures` is this run's + 1. The caller must enqueue the
   * successor's job.
   */
  async finish(
    run: RunRef,
    outcome: RunOutcome,
    opts: {
      reason?: string;
      mode?: SteeringMode;
      successorId?: string;
      /** Only when the run's lease ran out (an operator abandoning a run); a live lease throws LeaseHeldError. Default false. */
      abandon?: boolean;
      /** Outcome `failed` only: seqs of the messages the run took and did not answer, oldest first, for a follow-up run. Default none. */
      retry?: readonly number[];
    } = {},
  ): Promise<FinishResult> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const reason = (opts.reason ?? '').slice(0, 500);
    const successorId = opts.successorId ?? newRunId();
    assertRunId(successorId);
    const r = checkReply(
      'finish',
      await runScript(
        this.options.client,
        'finish',
        [k.run(run.runId), k.steer(run.runId), k.log, k.meta, k.active, k.pending, k.base],
        [
          run.token,
          run.runId,
          outcome,
          reason,
          successorId,
          opts.mode ?? DEFAULTS.agent.steeringMode,
          run.conversationId,
          this.options.retention.endedRunTtlSeconds,
          opts.abandon ? '1' : '0',
          this.options.retention.indexMaxEntries,
          (opts.retry ?? []).join(','),
        ],
      ),
      run.runId,
    );
    if (r[0] === 'continue') return { kind: 'continue', messages: entriesFrom(r) };
    if (retentionActive(this.options.retention)) {
      // Best effort: the run has ended either way, and the caller must still enqueue the successor; the next run end retries.
      await retainConversation(this.options.client, this.options.prefix, run.conversationId, this.options.retention, this.options.pluginKeys).catch(
        () => undefined,
      );
    }
    const successor = r[1] ? { runId: String(r[1]), inputs: seqList(r[2]) } : undefined;
    return { kind: 'ended', successor };
  }
}

function entriesFrom(r: ScriptReply): SeqEntry[] {
  return pairsFrom(r, 2, Number(r[1])).flatMap(({ seq, json }) => parseEntry(seq, json) ?? []);
}
