/**
 * Conversation-scoped state: `get` for anyone, `set`/`delete` fenced by a
 * run's token, with key validation, a JSON size cap and an optional
 * compare-and-set.
 */
import { InvalidInputError } from '../errors.js';
import { type RecordEntry, recordEntrySchema } from '../record/entries.js';
import { conversationKeys } from '../redis/keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';
import { type ProtocolOptions, type ResolvedProtocolOptions, resolveOptions } from './options.js';
import type { RunRef } from './runs.js';

/** Longest state key, in characters. */
export const MAX_STATE_KEY_LENGTH = 128;
// Namespaced: at least two dot-separated lowercase segments, e.g. `runner.compaction.checkpoint`.
const STATE_KEY_RE = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$/;

/** Throws InvalidInputError unless `key` is a namespaced state key. */
export function assertStateKey(key: string): void {
  if (typeof key !== 'string' || key.length > MAX_STATE_KEY_LENGTH || !STATE_KEY_RE.test(key)) {
    throw new InvalidInputError(
      `state key "${String(key).slice(0, 40)}" must be namespaced like "plugin.name" (lowercase dot-separated segments, at most ${MAX_STATE_KEY_LENGTH} characters)`,
    );
  }
}

/** What a `set` requires of the current value. */
export type StateExpectation = { kind: 'any' } | { kind: 'absent' } | { kind: 'equals'; raw: string };

/** Conversation state access. */
export class ConversationState {
  readonly options: ResolvedProtocolOptions;

  constructor(options: ProtocolOptions) {
    this.options = resolveOptions(options);
  }

  /** The raw JSON text stored under `key`, or undefined. */
  async getRaw(conversationId: string, key: string): Promise<string | undefined> {
    assertStateKey(key);
    const k = conversationKeys(this.options.prefix, conversationId);
    const v = await this.options.client.hget(k.state, key);
    return v ?? undefined;
  }

  /** The parsed JSON value under `key`, or undefined. Callers validate it (it came back from Redis). */
  async get(conversationId: string, key: string): Promise<unknown> {
    const raw = await this.getRaw(conversationId, key);
    if (raw === undefined) return undefined;
    try {
      return JSON.parse(raw);
    } catch {
      return undefined;
    }
  }

  /**
   * Sets `key` to `value` (JSON-serialized) for the run. Throws StaleRunError for
   * a stale token, CasConflictError when `expect` does not hold, InvalidInputError
   * for a bad key or an oversized / unserializable value.
   */
  async set(run: RunRef, key: string, value: unknown, expect: StateExpectation = { kind: 'any' }): Promise<void> {
    assertStateKey(key);
    await this.write(run, key, 'set', this.json(key, value), expect);
  }

  /** Deletes `key` for the run (fenced). */
  async delete(run: RunRef, key: string, expect: StateExpectation = { kind: 'any' }): Promise<void> {
    assertStateKey(key);
    await this.write(run, key, 'del', '', expect);
  }

  /**
   * Commits a compaction in one fenced script: sets the checkpoint under
   * `checkpoint.key` if `checkpoint.expect` still holds, appends `entry` (a
   * `compaction` entry), satisfies the `/compact` requests up to
   * `compactRequestedSeq` (the one the compaction read; 0 for none) and, when
   * given, sets the breaker. Returns the entry's
   * seq. Throws CasConflictError (nothing written) when another compaction
   * won, StaleRunError for a stale token, InvalidInputError for bad input.
   */
  async commitCompaction(
    run: RunRef,
    c: {
      checkpoint: { key: string; value: unknown; expect: { kind: 'absent' } | { kind: 'equals'; raw: string } };
      entry: RecordEntry;
      breaker?: { key: string; value: unknown };
      compactRequestedSeq: number;
    },
  ): Promise<number> {
    assertStateKey(c.checkpoint.key);
    if (c.breaker) assertStateKey(c.breaker.key);
    if (c.entry.kind !== 'compaction') throw new InvalidInputError(`commitCompaction takes a compaction entry, not ${c.entry.kind}`);
    const parsed = recordEntrySchema.safeParse(c.entry);
    if (!parsed.success) throw new InvalidInputError(`bad compaction entry: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const r = checkReply(
      'compaction-commit',
      await runScript(
        this.options.client,
        'compaction-commit',
        [k.run(run.runId), k.state, k.log, k.meta],
        [
          run.token,
          c.checkpoint.key,
          this.json(c.checkpoint.key, c.checkpoint.value),
          c.checkpoint.expect.kind,
          c.checkpoint.expect.kind === 'equals' ? c.checkpoint.expect.raw : '',
          this.options.maxStateBytes,
          JSON.stringify(parsed.data),
          c.breaker?.key ?? '',
          c.breaker ? this.json(c.breaker.key, c.breaker.value) : '',
          c.compactRequestedSeq,
        ],
      ),
      run.runId,
    );
    return Number(r[1]);
  }

  /**
   * Clears a `/compact` request that found nothing to compact, if it is the
   * one the run read (`seenSeq`) or older; a newer request stays. Fenced.
   * Returns whether a request was cleared.
   */
  async clearCompactRequest(run: RunRef, seenSeq: number): Promise<boolean> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    const r = checkReply(
      'compact-request-clear',
      await runScript(this.options.client, 'compact-request-clear', [k.run(run.runId), k.meta], [run.token, seenSeq]),
      run.runId,
    );
    return r[1] === 1;
  }

  /** `value` as JSON within the size cap; InvalidInputError otherwise. */
  private json(key: string, value: unknown): string {
    let json: string | undefined;
    try {
      json = JSON.stringify(value);
    } catch (cause) {
      throw new InvalidInputError(`state value for ${key} is not JSON-serializable: ${(cause as Error).message}`);
    }
    if (json === undefined) throw new InvalidInputError(`state value for ${key} is not JSON-serializable`);
    if (Buffer.byteLength(json) > this.options.maxStateBytes) {
      throw new InvalidInputError(`state value for ${key} is ${Buffer.byteLength(json)} bytes; the cap is ${this.options.maxStateBytes}`);
    }
    return json;
  }

  private async write(run: RunRef, key: string, op: 'set' | 'del', json: string, expect: StateExpectation): Promise<void> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    checkReply(
      'state-set',
      await runScript(
        this.options.client,
        'state-set',
        [k.run(run.runId), k.state],
        [run.token, key, op, json, expect.kind, expect.kind === 'equals' ? expect.raw : '', this.options.maxStateBytes],
      ),
      run.runId,
    );
  }
}
