/**
 * The Redis key schema. Every key of one conversation carries the hash tag
 * `{c:<conversation id>}` so each Lua script touches a single cluster slot.
 */
import { InvalidInputError } from './errors.js';

/** Longest accepted conversation id, in characters. */
export const MAX_CONVERSATION_ID_LENGTH = 256;
/** Longest accepted update key, in characters. */
export const MAX_UPDATE_KEY_LENGTH = 512;

// `{`/`}` would break the hash tag; whitespace and control characters have no place in ids.
const ID_RE = /^[^\s{}\u0000-\u001f]+$/;
const RUN_ID_RE = /^[A-Za-z0-9_-]{4,64}$/;

/** Throws InvalidInputError unless `id` is a usable conversation id. */
export function assertConversationId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_CONVERSATION_ID_LENGTH || !ID_RE.test(id)) {
    throw new InvalidInputError(
      `conversation id must be 1-${MAX_CONVERSATION_ID_LENGTH} characters without whitespace or braces`,
    );
  }
}

/** Throws InvalidInputError unless `key` is a usable update key. */
export function assertUpdateKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_UPDATE_KEY_LENGTH || !ID_RE.test(key)) {
    throw new InvalidInputError(`update key must be 1-${MAX_UPDATE_KEY_LENGTH} characters without whitespace or braces`);
  }
}

/**
 * Throws unless `id` is a usable run id. Run ids are BullMQ job ids, and BullMQ
 * refuses ids with `:` or made only of digits.
 */
export function assertRunId(id: string): void {
  if (!RUN_ID_RE.test(id) || /^\d+$/.test(id)) {
    throw new InvalidInputError('run id must be 4-64 characters of [A-Za-z0-9_-] and not all digits');
  }
}

/** Key names of one conversation. */
export interface ConversationKeys {
  /** Common prefix of every key of the conversation, ending in `:`; scripts derive per-run keys from it. */
  base: string;
  log: string;
  meta: string;
  active: string;
  pending: string;
  state: string;
  outbox: string;
  /** Run record of `runId`. */
  run(runId: string): string;
  /** Steering list of `runId`. */
  steer(runId: string): string;
  /** Input seqs of a run: the messages it was created for and those that joined it while queued (comma-separated, appended to). */
  inputs(runId: string): string;
  /** Dedupe key of one platform update. */
  dedupe(updateKey: string): string;
}

/** Key names of one conversation; per-run and per-update names are methods, so building one allocates no closures (ingest builds one per update). */
class Keys implements ConversationKeys {
  readonly log: string;
  readonly meta: string;
  readonly active: string;
  readonly pending: string;
  readonly state: string;
  readonly outbox: string;
  constructor(readonly base: string) {
    this.log = `${base}log`;
    this.meta = `${base}meta`;
    this.active = `${base}active`;
    this.pending = `${base}pending`;
    this.state = `${base}state`;
    this.outbox = `${base}outbox`;
  }
  run(runId: string): string {
    return `${this.base}run:${runId}`;
  }
  steer(runId: string): string {
    return `${this.base}steer:${runId}`;
  }
  inputs(runId: string): string {
    return `${this.base}inputs:${runId}`;
  }
  dedupe(updateKey: string): string {
    return `${this.base}dedupe:${updateKey}`;
  }
}

/** Builds the key names of a conversation under `prefix` (default `sb`). */
export function conversationKeys(prefix: string, conversationId: string): ConversationKeys {
  assertConversationId(conversationId);
  return new Keys(`${prefix}:{c:${conversationId}}:`);
}

/** Pattern that matches every conversation's `active` key (used by the reconciler's SCAN). */
export function activeKeyPattern(prefix: string): string {
  return `${prefix}:{c:*}:active`;
}

/** Recovers the conversation id from a key built by `conversationKeys`. */
export function conversationIdFromKey(prefix: string, key: string): string | undefined {
  const head = `${prefix}:{c:`;
  if (!key.startsWith(head)) return undefined;
  const end = key.indexOf('}:', head.length);
  return end < 0 ? undefined : key.slice(head.length, end);
}

/** Pub/sub channel on which run control requests (interrupt, supersede, stop) are published. */
export function controlChannel(prefix: string): string {
  return `${prefix}:control`;
}
