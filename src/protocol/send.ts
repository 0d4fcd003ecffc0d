/**
 * Messages sent to a conversation from outside a run (the messages API,
 * `sendMessage`): the request, its validation, the one script that
 * records it (deduped by the caller's idempotency key) and takes the key's
 * send lock, and the one that keeps the key's result once it is delivered
 * (so a retry within the key's window answers it, whatever the outbox pruned).
 * Delivery through the outbox is the runner's (`runner/delivery/send-message.ts`).
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { InvalidInputError } from '../errors.js';
import type { MessageSent } from '../record/entries.js';
import { assertUpdateKey, conversationKeys } from '../redis/keys.js';
import { type RedisClient, runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';

/** One message to send. */
export interface SendMessageRequest {
  /** The conversation (`<channel id>:<chat id>[:<thread id>]`). */
  conversationId: string;
  /** The text (1 to `dispatch.maxMessageChars` characters); split to the channel's limit like a reply. */
  text: string;
  /** Buttons under the message (at most 16): `label` shown (1–64 characters), `command` sent on a click (1–64 bytes). */
  buttons?: Array<{ label: string; command: string }>;
  /** The caller's idempotency key: one delivery per key (within the dedupe TTL, 24 h by default). 1–200 characters without whitespace or braces. */
  idempotencyKey: string;
}

/** What became of a send. */
export type SendMessageResult =
  /** Delivered (now, or by an earlier call with the same key: `duplicate`). `messageIds`: the platform's, one per part. */
  | { kind: 'sent'; seq: number; messageIds: string[]; duplicate: boolean }
  /** Recorded, but not (all) delivered: the channel refused or kept failing. A retry with the same key delivers what is unsent. */
  | { kind: 'failed'; seq: number; error: string }
  /** Another call with the same key is delivering it right now. */
  | { kind: 'busy'; seq: number }
  /** No such conversation (no record, and its channel cannot open one), or no channel serves it. Nothing written. */
  | { kind: 'unknown-conversation' }
  /** The conversation was purged and refuses updates. Nothing written. */
  | { kind: 'purged' };

/**
 * Commands a button never runs, whoever clicks it: they widen access (`/pair`,
 * `/link`) or delete (`/purge`, `/forget`), so they are typed by the person
 * who means them, never put under someone's finger by a message.
 */
export const TYPED_ONLY_COMMANDS: ReadonlySet<string> = new Set(['pair', 'link', 'purge', 'forget']);

/** The typed-only command `text` names (`/pair K7QM` → `pair`), or undefined. */
export function typedOnlyCommand(text: string): string | undefined {
  const name = /^\/([A-Za-z]+)(?:@[A-Za-z0-9_]+)?(?:\s|$)/.exec(text.trim())?.[1]?.toLowerCase();
  return name !== undefined && TYPED_ONLY_COMMANDS.has(name) ? name : undefined;
}

const buttonSchema = z.strictObject({
  // A label is only shown; one that reads as a typed-only command is refused all the same (a channel that echoed it back).
  label: z
    .string()
    .min(1)
    .max(64)
    .refine((l) => typedOnlyCommand(l) === undefined, { error: 'a button label cannot read /pair, /link, /purge or /forget' }),
  command: z
    .string()
    .refine((c) => c.length > 0 && Buffer.byteLength(c) <= 64, { error: 'expected 1-64 bytes' })
    .refine((c) => typedOnlyCommand(c) === undefined, { error: 'a button cannot carry /pair, /link, /purge or /forget' }),
});

/** A send request's fields as a JSON body carries them (the key comes from a header there). */
export const sendBodySchema = (maxChars: number) =>
  z.strictObject({
    text: z
      .string()
      .min(1, { error: 'expected non-empty text' })
      .max(maxChars, { error: `expected at most ${maxChars} characters` }),
    buttons: z.array(buttonSchema).min(1).max(16).optional(),
  });

/** Checks a request; throws InvalidInputError naming the first problem. */
export function assertSendRequest(req: SendMessageRequest, maxChars: number): void {
  const parsed = sendBodySchema(maxChars).safeParse({ text: req.text, ...(req.buttons !== undefined && { buttons: req.buttons }) });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidInputError(`bad message: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
  }
  if (typeof req.idempotencyKey !== 'string' || !/^[^\s{}]{1,200}$/.test(req.idempotencyKey)) {
    throw new InvalidInputError('bad message: idempotency key must be 1-200 characters without whitespace or braces');
  }
  assertUpdateKey(req.conversationId);
}

/** What `recordSend` answers. */
export type RecordSendResult =
  | { kind: 'recorded'; seq: number; lockToken: string }
  /** Seen before and delivered: the platform message ids kept under the key. Nothing written, no lock taken. */
  | { kind: 'done'; seq: number; messageIds: string[] }
  /** `scope`: the keys whose lock was taken and whose result is to be kept (`releaseSendLock`, `keepSendResult`). */
  | { kind: 'duplicate'; seq: number; lockToken: string; entry: MessageSent | undefined; scope: SendKeyScope }
  | { kind: 'busy'; seq: number }
  | { kind: 'unknown' }
  | { kind: 'purged' };

/** Options of `recordSend`. */
export interface RecordSendOptions {
  client: RedisClient;
  prefix: string;
  /** Dedupe TTL of the key, in seconds. */
  dedupeTtlSeconds: number;
  /** The send lock holds this long without a release, in ms (a crashed sender's key is free again after it). */
  lockMs: number;
  /** Refuse a conversation that has no record yet (its channel cannot open one). */
  known: boolean;
  /** Whose key it is: keys are deduped per caller; the record says `via: 'api'` for a token's. */
  caller: SendCaller;
  now?: () => number;
}

/**
 * Who asks for a send: an API token (by its configured name) or the package's
 * `sendMessage`. Idempotency keys are scoped to it, so one token's key never
 * answers, or holds back, another's send of the same key.
 */
export type SendCaller = { token: string } | 'package';

/**
 * Whose keys a recorded send holds: its caller's, or (`unscoped`) the ones
 * release 0.1.0 recorded it under, shared by every caller until they expire.
 */
export type SendKeyScope = SendCaller | 'unscoped';

/** The idempotency key as stored: `t:<token name>:<key>`, `p:<key>` (token names hold no `:`), or as 0.1.0 stored it. */
function scopedKey(key: string, scope: SendKeyScope): string {
  if (scope === 'unscoped') return key;
  return scope === 'package' ? `p:${key}` : `t:${scope.token}:${key}`;
}

/** The dedupe, lock and result keys of an idempotency key in `scope`. */
export function sendKeys(prefix: string, conversationId: string, key: string, scope: SendKeyScope) {
  const k = conversationKeys(prefix, conversationId);
  const scoped = scopedKey(key, scope);
  return {
    dedupe: k.dedupe(`send:${scoped}`),
    lock: `${k.base}send_lock:${scoped}`,
    result: `${k.base}send_result:${scoped}`,
    // Release 0.1.0 kept keys unscoped; a key it recorded is honoured until it expires, one dedupe window after an upgrade.
    dedupe010: k.dedupe(`send:${key}`),
    result010: `${k.base}send_result:${key}`,
    lock010: `${k.base}send_lock:${key}`,
    log: k.log,
    meta: k.meta,
    tombstone: k.tombstone,
  };
}

/** Records a checked request (`assertSendRequest`) in one script; see send-record-9.lua. */
export async function recordSend(req: SendMessageRequest, o: RecordSendOptions): Promise<RecordSendResult> {
  const keys = sendKeys(o.prefix, req.conversationId, req.idempotencyKey, o.caller);
  const entry: MessageSent = {
    v: 1,
    kind: 'message.sent',
    at: (o.now ?? Date.now)(),
    key: req.idempotencyKey,
    text: req.text,
    ...(req.buttons !== undefined && { buttons: req.buttons }),
    via: o.caller === 'package' ? 'package' : 'api',
  };
  const lockToken = randomBytes(12).toString('hex');
  const reply = checkReply(
    'send-record',
    await runScript(
      o.client,
      'send-record',
      [keys.dedupe, keys.log, keys.meta, keys.lock, keys.tombstone, keys.result, keys.dedupe010, keys.result010, keys.lock010],
      [JSON.stringify(entry), o.dedupeTtlSeconds, o.lockMs, lockToken, o.known ? '1' : '0'],
    ),
  );
  switch (reply[0]) {
    case 'recorded':
      return { kind: 'recorded', seq: Number(reply[1]), lockToken };
    case 'done':
      return { kind: 'done', seq: Number(reply[1]), messageIds: parseIds(String(reply[2])) };
    case 'duplicate':
      return {
        kind: 'duplicate',
        seq: Number(reply[1]),
        lockToken,
        entry: parseSent(String(reply[2] ?? '')),
        scope: reply[3] === 'unscoped' ? 'unscoped' : o.caller,
      };
    case 'busy':
      return { kind: 'busy', seq: Number(reply[1]) };
    case 'unknown':
      return { kind: 'unknown' };
    default:
      return { kind: 'purged' };
  }
}

/** Releases the key's send lock (only if this call still holds it). */
export async function releaseSendLock(client: RedisClient, prefix: string, req: SendMessageRequest, scope: SendKeyScope, lockToken: string): Promise<void> {
  await runScript(client, 'lock-release', [sendKeys(prefix, req.conversationId, req.idempotencyKey, scope).lock], [lockToken]);
}

/**
 * Keeps the platform message ids of a delivered send under its key, for the
 * rest of the key's dedupe window (send-result-1.lua): a retry answers them
 * and sends nothing, even after the outbox pruned the part records.
 */
export async function keepSendResult(
  client: RedisClient,
  prefix: string,
  req: SendMessageRequest,
  scope: SendKeyScope,
  seq: number,
  messageIds: readonly string[],
): Promise<void> {
  await runScript(client, 'send-result', [sendKeys(prefix, req.conversationId, req.idempotencyKey, scope).result], [seq, JSON.stringify(messageIds)]);
}

const idsSchema = z.array(z.string());

function parseIds(raw: string): string[] {
  return idsSchema.parse(JSON.parse(raw));
}

function parseSent(raw: string): MessageSent | undefined {
  if (raw === '') return undefined;
  const v = JSON.parse(raw) as MessageSent;
  return v.kind === 'message.sent' ? v : undefined;
}
