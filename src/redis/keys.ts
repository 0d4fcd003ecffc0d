/**
 * The Redis key schema. Every key of one conversation carries the hash tag
 * `{c:<conversation id>}` so each Lua script touches a single cluster slot.
 */
import { InvalidInputError } from '../errors.js';

/** Longest accepted conversation id, in characters. */
export const MAX_CONVERSATION_ID_LENGTH = 256;
/** Longest accepted update key, in characters. */
export const MAX_UPDATE_KEY_LENGTH = 512;

// `{`/`}` would break the hash tag; whitespace and control characters have no place in ids.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is what this pattern is for.
const ID_RE = /^[^\s{}\u0000-\u001f]+$/;
const RUN_ID_RE = /^[A-Za-z0-9_-]{4,64}$/;

/** Throws InvalidInputError unless `id` is a usable conversation id. */
export function assertConversationId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_CONVERSATION_ID_LENGTH || !ID_RE.test(id)) {
    throw new InvalidInputError(`conversation id must be 1-${MAX_CONVERSATION_ID_LENGTH} characters without whitespace or braces`);
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
  /** Delivery keys of the outbox by the time they were first claimed (sorted set, ms): entries older than the outbox TTL are pruned. */
  outboxIndex: string;
  /** Ids of the conversation's runs (sorted set; score: ms when the run's keys expire, `+inf` while not ended): what purge deletes. */
  runs: string;
  /** Large tool results (hash: artifact id → text; TTL refreshed on write). Deleted by reset and purge. */
  artifacts: string;
  /** Tool approval requests and their decisions (hash: approval id → JSON). */
  approvals: string;
  /** Left by purge: the conversation's data is gone; `mode` says what a later update gets, `seq` is the purged record's last seq. */
  tombstone: string;
  /** The conversation's reply stream, for channels that keep one (`src/reply-stream.ts`). */
  readonly replies: string;
  /** The conversation's schedules (hash: schedule id → JSON, `src/schedules/`). Deleted by purge, never expired by idle retention. */
  readonly schedules: string;
  /** Run record of `runId`. */
  run(runId: string): string;
  /** Steering list of `runId`. */
  steer(runId: string): string;
  /** Input seqs of a run: the messages it was created for and those that joined it while queued (comma-separated, appended to). */
  inputs(runId: string): string;
  /** Dedupe key of one platform update. */
  dedupe(updateKey: string): string;
  /** Marks that the reply with this delivery key is in `replies` (holds its stream id): a redelivery stores it once. */
  replyStored(deliveryKey: string): string;
}

/** Key names of one conversation; per-run and per-update names are methods, so building one allocates no closures (ingest builds one per update). */
class Keys implements ConversationKeys {
  readonly log: string;
  readonly meta: string;
  readonly active: string;
  readonly pending: string;
  readonly state: string;
  readonly outbox: string;
  readonly outboxIndex: string;
  readonly runs: string;
  readonly tombstone: string;
  readonly artifacts: string;
  readonly approvals: string;
  constructor(readonly base: string) {
    this.log = `${base}log`;
    this.meta = `${base}meta`;
    this.active = `${base}active`;
    this.pending = `${base}pending`;
    this.state = `${base}state`;
    this.outbox = `${base}outbox`;
    this.outboxIndex = `${base}outbox_at`;
    this.runs = `${base}runs`;
    this.tombstone = `${base}tombstone`;
    this.artifacts = `${base}artifacts`;
    this.approvals = `${base}approvals`;
  }
  // Named when asked for: ingest builds the keys of every update and needs none of it.
  get replies(): string {
    return `${this.base}replies`;
  }
  get schedules(): string {
    return `${this.base}schedules`;
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
  replyStored(deliveryKey: string): string {
    return `${this.base}reply_stored:${deliveryKey}`;
  }
}

/**
 * Suffixes (after the base `<prefix>:{c:<id>}:`) of every core key a
 * conversation has once, besides the per-run (`run:`, `steer:`, `inputs:`)
 * and per-update (`dedupe:`) keys: what purge deletes and idle expiry
 * expires, together with the keys plugins declare (`PluginStorageDeclaration`).
 * `replies`: the reply stream; `rate`: ingest's rate limits; `artifacts`,
 * `approvals`: large tool results and tool approvals; `files`: the index of
 * the files kept for signed download (`signedFileStore`), whose `file:<id>`
 * keys purge finds from it; `idle_keys`: which keys
 * idle expiry set to expire (a new run makes them persistent again). The
 * `reply_stored:<delivery key>` keys are found from the outbox's delivery keys.
 */
export const CONVERSATION_KEY_SUFFIXES = [
  'log',
  'meta',
  'active',
  'pending',
  'state',
  'outbox',
  'outbox_at',
  'runs',
  'rate',
  'replies',
  'artifacts',
  'approvals',
  'files',
  'idle_keys',
] as const;

/**
 * Suffixes of conversation keys purge deletes but idle retention leaves alone:
 * `schedules` (a reminder a month ahead must outlive a quiet conversation).
 * Neither deletes `usage`, the conversation's budget counters: tokens and
 * runs by window, no one's words, which expire on their own after their
 * month; a purge that deleted them would hand whoever may `/purge` a fresh budget.
 */
export const PURGE_ONLY_KEY_SUFFIXES = ['schedules'] as const;

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

/**
 * Keys of people (identities, their linked accounts, access): all carry the
 * hash tag `{people}`, so linking two accounts, approving a pairing code or
 * purging an identity is one script in one cluster slot. They hold only
 * linked accounts, paired identities and short-lived codes, never messages.
 */
export interface PeopleKeys {
  /** Common prefix of every people key, ending in `:`; scripts derive per-identity keys from it. */
  base: string;
  /** Hash: account (`<channel>:<user id>`) → identity id, for linked accounts only. */
  links: string;
  /** Set of the accounts linked into `identity`. */
  members(identity: string): string;
  /** Set of the identity ids an admin approved (`pairing` channels). */
  paired: string;
  /** Sorted set: hash of every waiting pairing code → its expiry (ms). */
  codes: string;
  /** A waiting pairing code's record (JSON, TTL; no code), by the SHA-256 of the code. */
  code(hash: string): string;
  /** The SHA-256 of the pairing code an account waits with (TTL; codes are never kept in clear). */
  pending(account: string): string;
  /** Set while a refused account was answered within the notice window (TTL). */
  notice(account: string): string;
  /** Wrong codes one account sent in the guess window (counter, TTL). */
  guesses(account: string): string;
  /** The account that asked for a `/link` code (TTL), by the SHA-256 of the code. */
  linkCode(hash: string): string;
  /** The SHA-256 of the one `/link` code an account has out (TTL). */
  linkPending(account: string): string;
  /** Stream of refused messages (channel, chat, user, reason), capped: what the console lists. Never message text. */
  refused: string;
}

/** The people keys under `prefix`. */
export function peopleKeys(prefix: string): PeopleKeys {
  const base = `${prefix}:{people}:`;
  return {
    base,
    links: `${base}links`,
    members: (identity) => `${base}members:${identity}`,
    paired: `${base}paired`,
    codes: `${base}codes`,
    code: (hash) => `${base}code:${hash}`,
    pending: (account) => `${base}pending:${account}`,
    notice: (account) => `${base}notice:${account}`,
    guesses: (account) => `${base}guesses:${account}`,
    linkCode: (hash) => `${base}link_code:${hash}`,
    linkPending: (account) => `${base}link_pending:${account}`,
    refused: `${base}refused`,
  };
}
