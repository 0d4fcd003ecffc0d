/**
 * The chaos suite's platform side: signed webhook updates POSTed the way a
 * platform delivers them (retried on 503 or a dropped connection until a 2xx
 * says the update was taken), and the tally of what came back at the
 * callback receiver: every update's token must appear in exactly one reply
 * per answer part.
 */

import { pendingKey } from '../../../plugins/webhook/keys.js';
import { signedHeaders } from '../../../plugins/webhook/signature.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { activeKeyPattern } from '../../../src/redis/keys.js';
import type { ReceivedCallback } from '../../../testing/fakes/webhook-callback-server.js';

/** Secret of the suite's webhook channel `chaos`. */
export const WEBHOOK_SECRET = 'whsec-chaos-0123456789abcdef';
/** The channel id of that channel. */
export const CHANNEL = 'webhook:chaos';
/** Its route. */
export const WEBHOOK_PATH = '/webhooks/chaos';

/** The config file section of the webhook channel, calling back to `callbackUrl`. */
export function webhookChannel(callbackUrl: string): Record<string, unknown> {
  // Quick retries and polls: the outages are short and the suite waits for the callbacks.
  return {
    webhooks: {
      chaos: { secret: WEBHOOK_SECRET, callbackUrl, callbackRetryBaseMs: 50, callbackMaxDelayMs: 1000, callbackPollMs: 20, callbackMaxAttempts: 10_000 },
    },
  };
}

/** One update of the load: `token` is its id and its text, so replies can be traced back to it. */
export interface Update {
  token: string;
  conversation: string;
  raw: string;
}

/** `count` updates spread round-robin over `conversations` conversations. */
export function makeUpdates(count: number, conversations: number, tag: string): Update[] {
  return Array.from({ length: count }, (_, i) => {
    const token = `${tag}${i}`;
    const conversation = `${tag}-c${i % conversations}`;
    return { token, conversation, raw: JSON.stringify({ id: token, conversation, sender: { id: `user-${i % conversations}` }, text: token }) };
  });
}

/** What one POST got: the HTTP status, or 0 when the connection failed. */
export async function postUpdate(baseUrl: string, raw: string): Promise<number> {
  try {
    const res = await fetch(`${baseUrl}${WEBHOOK_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) },
      body: raw,
      signal: AbortSignal.timeout(30_000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Statuses seen by a load generator, counted. */
export class StatusCounts {
  readonly counts = new Map<number, number>();
  add(status: number): void {
    this.counts.set(status, (this.counts.get(status) ?? 0) + 1);
  }
  get(status: number): number {
    return this.counts.get(status) ?? 0;
  }
  /** Statuses of 500 and above (0, a failed connection, is not one). */
  serverErrors(): number {
    let n = 0;
    for (const [s, c] of this.counts) if (s >= 500) n += c;
    return n;
  }
  toString(): string {
    return [...this.counts]
      .sort(([a], [b]) => a - b)
      .map(([s, c]) => `${s}×${c}`)
      .join(' ');
  }
}

/**
 * Delivers one update as a platform does: POSTs it until a 2xx (taken) or a
 * 4xx (refused); a 503 or a failed connection is tried again after `retryMs`.
 * Returns the final status; throws after `deadlineMs` without one.
 */
export async function deliver(baseUrl: () => string, raw: string, statuses: StatusCounts, deadlineMs = 60_000, retryMs = 50): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const status = await postUpdate(baseUrl(), raw);
    statuses.add(status);
    if (status >= 200 && status < 500 && status !== 408 && status !== 429) return status;
    if (Date.now() > deadline) throw new Error(`update not taken within ${deadlineMs} ms (last status ${status}): ${raw.slice(0, 80)}`);
    await new Promise((r) => setTimeout(r, retryMs));
  }
}

/** Runs `fn` over `items` with at most `limit` at once; stops at the first failure. */
export async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** What the callback receiver got, traced back to updates. */
export interface Tally {
  /** Tokens with a part that no reply carried, as `token#part`. */
  missing: string[];
  /** Tokens with a part carried by more than one distinct reply, with those replies' message ids. */
  duplicated: Array<{ answer: string; messageIds: string[] }>;
  /** Accepted callbacks that repeated an earlier one's message id (a receiver dedupes those by `Idempotency-Key`). */
  repeatedPosts: number;
  /** Message ids posted again with a different text: never allowed. */
  conflicting: string[];
  /** Replies that are not the agent's answers (failure notices, anything unexpected), by text. */
  unexpected: string[];
  /** Distinct replies. */
  replies: number;
}

const PART_RE = /^part (\d+)\/(\d+): ([\s\S]*)$/;

/** The tokens an answer echoes: one per line, the line's last word (a prompt line may carry the sender first: `user-3: k12`). */
const tokensOf = (payload: string): string[] => payload.split('\n').map((line) => line.trim().split(/\s+/).at(-1) ?? '');

/** Traces accepted callbacks back to `tokens`; every token must be answered once in each of `parts` parts. */
export function tally(callbacks: readonly ReceivedCallback[], tokens: Iterable<string>, parts: number): Tally {
  const byId = new Map<string, string>();
  let repeatedPosts = 0;
  const conflicting: string[] = [];
  for (const cb of callbacks) {
    if (cb.status >= 300) continue;
    const seen = byId.get(cb.body.messageId);
    if (seen === undefined) byId.set(cb.body.messageId, cb.body.text);
    else {
      repeatedPosts++;
      if (seen !== cb.body.text) conflicting.push(cb.body.messageId);
    }
  }
  const answers = new Map<string, string[]>();
  const unexpected: string[] = [];
  for (const [messageId, text] of byId) {
    const m = PART_RE.exec(text);
    if (!m) {
      unexpected.push(text.slice(0, 200));
      continue;
    }
    for (const token of tokensOf(m[3]!)) {
      const key = `${token}#${m[1]}`;
      answers.set(key, [...(answers.get(key) ?? []), messageId]);
    }
  }
  const missing: string[] = [];
  const expected = new Set<string>();
  for (const token of tokens) {
    for (let p = 1; p <= parts; p++) {
      const key = `${token}#${p}`;
      expected.add(key);
      if (!answers.has(key)) missing.push(key);
    }
  }
  const duplicated: Tally['duplicated'] = [];
  for (const [answer, ids] of answers) {
    if (ids.length > 1) duplicated.push({ answer, messageIds: ids });
    else if (!expected.has(answer)) unexpected.push(`answer to an update never taken: ${answer}`);
  }
  return { missing, duplicated, repeatedPosts, conflicting, unexpected, replies: byId.size };
}

/** A one-line summary of a tally for the test output. */
export function describeTally(t: Tally): string {
  return `replies=${t.replies} missing=${t.missing.length} duplicated=${t.duplicated.length} repeatedPosts=${t.repeatedPosts} conflicting=${t.conflicting.length} unexpected=${t.unexpected.length}`;
}

/**
 * The system has nothing left to do: no conversation has an active run and no
 * reply waits for its callback. Two checks in a row, 100 ms apart, must agree
 * (a run's successor is created in the same script that ends it, so a quiet
 * moment between the two cannot be seen). False while Redis cannot be asked.
 */
export async function quiet(redis: RedisClient, prefix: string): Promise<boolean> {
  try {
    for (let i = 0; i < 2; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      if ((await redis.zcard(pendingKey(prefix, CHANNEL))) > 0) return false;
      const [, active] = await redis.scan('0', 'MATCH', activeKeyPattern(prefix), 'COUNT', 100_000);
      if (active.length > 0) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * Which update answers (`token#part`) the receiver has taken so far, read
 * incrementally from its request list: a closed-loop load generator waits for
 * its update's answer before it sends the next one.
 */
export class AnswerIndex {
  private readonly seen = new Set<string>();
  private read = 0;
  constructor(private readonly callbacks: { requests: readonly ReceivedCallback[] }) {}

  /** Whether every one of `parts` answers of `token` arrived. */
  answered(token: string, parts: number): boolean {
    const requests = this.callbacks.requests;
    for (; this.read < requests.length; this.read++) {
      const cb = requests[this.read]!;
      const m = cb.status < 300 ? PART_RE.exec(cb.body.text) : null;
      if (m) for (const t of tokensOf(m[3]!)) this.seen.add(`${t}#${m[1]}`);
    }
    for (let p = 1; p <= parts; p++) if (!this.seen.has(`${token}#${p}`)) return false;
    return true;
  }
}
