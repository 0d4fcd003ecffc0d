/**
 * Conversation-scoped state: `get` for anyone, `set`/`delete` fenced by a
 * run's token, with key validation, a JSON size cap and an optional
 * compare-and-set.
 */
import { InvalidInputError } from '../errors.js';
import { conversationKeys } from '../keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';
import { resolveOptions, type ProtocolOptions, type ResolvedProtocolOptions } from './options.js';
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
    await this.write(run, key, 'set', json, expect);
  }

  /** Deletes `key` for the run (fenced). */
  async delete(run: RunRef, key: string, expect: StateExpectation = { kind: 'any' }): Promise<void> {
    assertStateKey(key);
    await this.write(run, key, 'del', '', expect);
  }

  private async write(run: RunRef, key: string, op: 'set' | 'del', json: string, expect: StateExpectation): Promise<void> {
    const k = conversationKeys(this.options.prefix, run.conversationId);
    checkReply(
      'state-set',
      await runScript(this.options.client, 'state-set', [k.run(run.runId), k.state], [
        run.token,
        key,
        op,
        json,
        expect.kind,
        expect.kind === 'equals' ? expect.raw : '',
        this.options.maxStateBytes,
      ]),
      run.runId,
    );
  }
}
