/**
 * Callback delivery, apart from runs. `send` appends a reply to the
 * conversation's reply stream and marks the conversation pending; the pump,
 * on every host that started the channel, POSTs each pending conversation's
 * replies to the callback URL in stream order, retrying with backoff until
 * the receiver answers 2xx. The id of the last reply the receiver took is
 * kept per conversation in Redis, so a restart (or another host) goes on
 * from there; a lock keeps one host at a time on a conversation. A receiver
 * that is down therefore holds no run and no runner slot.
 *
 * Pending conversations are a sorted set scored by when each is due: 0 (now)
 * when marked; the expiry of its lock while a host works on it; the retry time
 * while it waits out a failure. Only the host holding a conversation's lock
 * changes its score. A poll reads only due conversations, a page at a time, so
 * a receiver that is down for thousands of conversations costs a poll no more
 * than one page, and every host sees the same retry schedule.
 *
 * A stored reply also publishes a wake-up (`notifyPending`): a pump sleeping
 * between polls looks at once instead of after `callbackPollMs`, so a reply
 * is called back within a round trip or two of being stored. The poll stays:
 * a wake-up missed (subscriber reconnecting, a host started late) costs one
 * poll interval, never a reply.
 *
 * A pass over a conversation costs few round trips: a claim (the lock, the
 * cursor and the first replies after it, one script), the score sent beside
 * the first POST, per reply an advance (cursor moved, lock renewed, the next
 * replies read once the read ones are sent, one script), and at the end the
 * pending mark dropped and a finish (a last look and the lock released, one
 * script). The conversation's keys share its cluster slot; the pending set is
 * in another, so it is never in a script with them.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { backoffMs, type HttpRequest, HttpTimeoutError, type RedisClient, retryAfterMs, storage } from 'steerbot/plugin';
import type { WebhookChannelConfig } from './config.js';
import type { WebhookReply } from './events.js';
import { cursorKey, givenUpKey, lockKey, pendingKey, wakeChannel } from './keys.js';
import { signedHeaders } from './signature.js';

/** Takes a conversation's lock and reads its cursor and the replies after it, in one step. */
const callbackClaim = storage.defineScript(new URL('./callback-claim-3.lua', import.meta.url));
/** Moves a conversation's cursor, keeps its lock and reads the replies after it, only while this host holds the lock. */
const callbackAdvance = storage.defineScript(new URL('./callback-advance-3.lua', import.meta.url));
/** Looks for a reply after the cursor and releases the lock, in one step. */
const callbackFinish = storage.defineScript(new URL('./callback-finish-2.lua', import.meta.url));
/** Marks a conversation pending and publishes the wake-up, in one command. */
const callbackMark = storage.defineScript(new URL('./callback-mark-1.lua', import.meta.url));

/**
 * Marks a conversation pending, due now unless it already waits for a retry (its replies stay in order either way).
 * No wake-up: it marks again a reply whose own store published one.
 */
async function markPending(redis: RedisClient, prefix: string, channelId: string, conversationId: string): Promise<void> {
  await redis.zadd(pendingKey(prefix, channelId), 'NX', 0, conversationId);
}

/**
 * Marks a conversation pending and wakes the channel's pumps, in one command (the mark first, so a woken pump
 * finds it). The wake-up may be lost: the poll finds the mark.
 */
export async function notifyPending(redis: RedisClient, prefix: string, channelId: string, conversationId: string): Promise<void> {
  await callbackMark.run(redis, [pendingKey(prefix, channelId)], [conversationId, wakeChannel(prefix, channelId)]);
}

/** Replies read per round trip. */
const BATCH = 50;
/** Due conversations read per poll. */
export const DUE_PAGE = 100;
/** Pages one poll reads past, when every conversation on them is held by another host. */
const MAX_PAGES = 10;
/** Longest a host leaves alone a conversation whose lock another host holds, in ms. */
const HELD_ELSEWHERE_MAX_MS = 1000;
/** Conversations pumped at once by one host. */
const PARALLEL = 8;

/** A status worth retrying: the receiver may accept the same request later. */
const retryable = (status: number) => status === 408 || status === 425 || status === 429 || status >= 500;

/** How one POST ended. */
type Outcome = { kind: 'taken' } | { kind: 'refused'; status: number } | { kind: 'failed'; why: string; retryAfterMs?: number };

/** Stream entries as XRANGE answers them: `[id, [field, value, …]]`. */
type Entries = Array<[string, string[]]>;

/** One host's pass over one conversation, under its lock. */
interface Pass {
  conversationId: string;
  /** The conversation's lock, cursor and reply stream: one slot, so one script may touch all three. */
  keys: [lock: string, cursor: string, replies: string];
  /** This pass's lock token. */
  token: string;
  lockMs: number;
  /** Stream id of the last reply the receiver took ('0-0': none). */
  cursor: string;
  /** The score says what comes next (done, retry time, another host's); else the pass ends with the conversation due again now. */
  settled: boolean;
  /** The lock needs nothing more from the pass (released, kept for a retry, or another host's); else the pass releases it. */
  lockDone: boolean;
}

export interface CallbackPumpOptions {
  channelId: string;
  config: WebhookChannelConfig;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** Sends the POSTs: a pooled keep-alive client (`createHttpClient`), or a stand-in in tests. */
  request: HttpRequest;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** POSTs pending replies to the callback URL until stopped. */
export class CallbackPump {
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  /** Per conversation: consecutive failures of its oldest reply on this host (counted again from 1 for another reply). */
  private readonly failures = new Map<string, { replyId: string; count: number }>();
  /** Conversations whose lock another host holds, until when (the lock's expiry): not asked for again before. */
  private readonly heldElsewhere = new Map<string, number>();
  private readonly now: () => number;
  private readonly url: string;
  /** `Authorization: Basic …` from the credentials of `callbackUrl` (sent as a header, not in the URL). */
  private readonly auth: Record<string, string>;
  private readonly secret: string;
  /** Ends the current pause between polls early (a wake-up arrived); replaced for every pause. */
  private wake: (() => void) | undefined;
  /** A wake-up arrived during a poll: the next one starts at once. */
  private woken = false;
  /** The connection subscribed to wake-ups (a subscribed connection takes no other commands). */
  private subscriber: RedisClient | undefined;

  constructor(private readonly o: CallbackPumpOptions) {
    this.now = o.now ?? Date.now;
    ({ url: this.url, auth: this.auth } = splitCredentials(o.config.callbackUrl ?? ''));
    this.secret = o.config.callbackSecret ?? o.config.secret;
  }

  start(): void {
    if (this.loop) return;
    this.listen();
    this.loop = this.run();
  }

  /** Stops after the POST in flight (if any) ends or is aborted. */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.subscriber?.disconnect();
    this.subscriber = undefined;
    await this.loop;
  }

  /** Subscribes to wake-ups on a connection of its own; without it (subscription failed) the pump only polls. */
  private listen(): void {
    const sub = storage.blockingConnection(this.o.redis);
    this.subscriber = sub;
    sub.on('message', () => this.poke());
    sub.subscribe(wakeChannel(this.o.prefix, this.o.channelId)).catch((err: unknown) => {
      if (!this.stopping.signal.aborted) this.o.logger.warn({ err }, 'webhook callbacks: could not subscribe to wake-ups; polling only');
    });
  }

  /** A reply was stored somewhere: end the pause now, or poll again right after the poll under way. */
  private poke(): void {
    if (this.wake) this.wake();
    else this.woken = true;
  }

  /** Waits `ms`, or less when woken or stopped. */
  private async pause(ms: number): Promise<void> {
    const signal = this.stopping.signal;
    if (this.woken || ms <= 0 || signal.aborted) {
      this.woken = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }

  /** Sets when a pending conversation is due next (ms since the epoch), if it is still pending. Only the lock holder calls it. */
  private async schedule(conversationId: string, at: number): Promise<void> {
    await this.o.redis.zadd(pendingKey(this.o.prefix, this.o.channelId), 'XX', Math.round(at), conversationId);
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the poll loop: page through due conversations, skip the ones held elsewhere, pause; its state is the loop itself
  private async run(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      let pause = this.o.config.callbackPollMs;
      try {
        const now = this.now();
        for (const [c, until] of this.heldElsewhere) if (until <= now) this.heldElsewhere.delete(c);
        let took = false;
        let full = false;
        for (let page = 0; page < MAX_PAGES && !signal.aborted; page++) {
          const due = await this.o.redis.zrangebyscore(pendingKey(this.o.prefix, this.o.channelId), '-inf', now, 'LIMIT', page * DUE_PAGE, DUE_PAGE);
          const mine = due.filter((c) => !this.heldElsewhere.has(c));
          for (let i = 0; i < mine.length && !signal.aborted; i += PARALLEL) {
            const outcomes = await Promise.allSettled(mine.slice(i, i + PARALLEL).map((c) => this.pump(c)));
            for (const o of outcomes) {
              if (o.status === 'fulfilled') took ||= o.value;
              else throw o.reason; // after the others of the group ended: none outlives the poll
            }
          }
          full = due.length === DUE_PAGE;
          // Past a page only when all of it is held by other hosts (an earlier version's, or one that died): the rest must not starve.
          if (!full || mine.length > 0) break;
        }
        // A full page this host made progress on: more may be due; look again at once.
        if (full && took) pause = 0;
      } catch (err) {
        this.o.logger.warn({ err }, 'webhook callbacks: could not read pending replies; trying again');
        pause = Math.max(pause, 1000);
        this.woken = false; // Redis is failing: no hot retries, wake-ups or not
      }
      await this.pause(pause); // stopped: the loop ends
    }
  }

  /** Sends a conversation's replies after its cursor, in order, until one fails or none is left. False when another host holds it. */
  private async pump(conversationId: string): Promise<boolean> {
    const { prefix, redis } = this.o;
    const lockMs = Math.max(30_000, 3 * this.o.config.callbackTimeoutMs);
    const keys: Pass['keys'] = [lockKey(prefix, conversationId), cursorKey(prefix, conversationId), storage.replyStreamKey(prefix, conversationId)];
    const pass: Pass = { conversationId, keys, token: randomBytes(8).toString('hex'), lockMs, cursor: '0-0', settled: false, lockDone: false };
    const claimed = await callbackClaim.run(redis, keys, [pass.token, lockMs, BATCH]);
    if (claimed[0] !== 1) {
      // Another host is on it; it keeps the score (only the holder writes it). Not asked for again for a
      // while: until its lock runs out, at most a second (it may hand the conversation back sooner).
      const msLeft = Number(claimed[1]);
      this.heldElsewhere.set(conversationId, this.now() + Math.min(HELD_ELSEWHERE_MAX_MS, Math.max(msLeft, this.o.config.callbackPollMs)));
      this.failures.delete(conversationId);
      return false;
    }
    this.heldElsewhere.delete(conversationId);
    pass.cursor = String(claimed[1]);
    // Not due for anyone while this host holds it (renewed with the lock); if this host dies, due again when the lock
    // runs out. Sent beside the first POST, not before it, and awaited after it (where a failure surfaces).
    const scheduled = this.schedule(conversationId, this.now() + lockMs);
    scheduled.catch(() => undefined);
    try {
      await this.deliver(pass, claimed[2] as unknown as Entries, scheduled);
    } finally {
      // Cut off by shutdown or an error: due again at once, for this host's next poll or another host.
      if (!pass.settled) await this.schedule(conversationId, 0).catch(() => undefined);
      if (!pass.lockDone) await new storage.RedisLease(redis, keys[0], pass.token, lockMs).release().catch(() => undefined);
    }
    return true;
  }

  /**
   * Sends a claimed conversation's replies, `entries` (read with the claim) first, each advance reading the next
   * ones when the last read ends, then gives the conversation up; stops at a failure to wait out, a lost lock or shutdown.
   */
  private async deliver(pass: Pass, entries: Entries, scheduled: Promise<void>): Promise<void> {
    let batch = entries;
    let next = 0;
    let scoredAt = this.now();
    let first: Promise<void> | undefined = scheduled;
    while (next < batch.length) {
      if (this.stopping.signal.aborted) return;
      const [id, fields] = batch[next] as Entries[number];
      const outcome = await this.sendReply(pass.conversationId, id, fields);
      await first;
      first = undefined;
      // Cut off by shutdown: not the receiver's failure; the next host sends this reply again.
      if (outcome.kind === 'failed' && this.stopping.signal.aborted) return;
      const wait = outcome.kind === 'failed' ? this.retryWait(pass.conversationId, id, outcome) : undefined;
      if (wait !== undefined) return this.waitOut(pass, wait);
      if (outcome.kind === 'refused') {
        this.o.logger.error(
          { conversationId: pass.conversationId, replyId: id, status: outcome.status },
          'webhook callback refused by the receiver (4xx); that reply is not sent again',
        );
        this.recordGivenUp(pass.conversationId, id);
      }
      this.failures.delete(pass.conversationId);
      const last = next === batch.length - 1;
      const more = await this.advance(pass, id, pass.lockMs, last ? BATCH : 0);
      // Lost the lock (it ran out and another host took the conversation): stop; that host goes on.
      if (!more) {
        this.o.logger.warn(
          { conversationId: pass.conversationId, replyId: id },
          'webhook callbacks: lost the lock of a conversation to another host; leaving it to that host',
        );
        pass.settled = pass.lockDone = true;
        return;
      }
      pass.cursor = id;
      // The lock was renewed; the score follows once half of it has passed (not per reply), so a long
      // backlog never falls due while this host still sends it.
      if (this.now() - scoredAt >= pass.lockMs / 2) {
        scoredAt = this.now();
        await this.schedule(pass.conversationId, scoredAt + pass.lockMs);
      }
      [batch, next] = last ? [more, 0] : [batch, next + 1];
    }
    await first;
    await this.finish(pass);
  }

  /** POSTs one stored reply; an unreadable one counts as taken (logged), so it does not hold up the rest. */
  private async sendReply(conversationId: string, replyId: string, fields: string[]): Promise<Outcome> {
    const reply = parseReply(fields);
    if (reply) return this.post(reply);
    this.o.logger.error({ conversationId, replyId }, 'webhook callbacks: a stored reply is not readable; skipped');
    return { kind: 'taken' };
  }

  /** After a failed POST: keeps the lock until the retry is due and schedules the retry then, so no host retries sooner. */
  private async waitOut(pass: Pass, wait: number): Promise<void> {
    // The lock first, then the score: the conversation is not due before its lock runs out.
    const held = (await this.advance(pass, '', Math.max(1, wait), 0)) !== undefined;
    pass.lockDone = true;
    if (held) await this.schedule(pass.conversationId, this.now() + wait);
    pass.settled = true;
  }

  /**
   * Moves the cursor to `id` ('' keeps it), keeps the lock `ms` longer and reads up to `count` replies after the
   * cursor, if the lock is still the pass's: the replies read; undefined when the lock is not.
   */
  private async advance(pass: Pass, id: string, ms: number, count: number): Promise<Entries | undefined> {
    const reply = await callbackAdvance.run(this.o.redis, pass.keys, [pass.token, id, ms, count]);
    return reply[0] === 1 ? (reply[1] as unknown as Entries) : undefined;
  }

  /** Gives up a conversation with nothing left after its cursor: drops its pending mark, then looks once more and releases its lock. */
  private async finish(pass: Pass): Promise<void> {
    const [lock, , replies] = pass.keys;
    // A reply stored after the ZREM marks the conversation again itself; one stored before it found this host's mark
    // and left it, and the ZREM drops that mark: the look after the ZREM finds that reply, and marks it again. The
    // look is sent once the ZREM is answered: the two keys' slots may be on different cluster nodes, with no order between them.
    await this.o.redis.zrem(pendingKey(this.o.prefix, this.o.channelId), pass.conversationId);
    const [more] = await callbackFinish.run(this.o.redis, [lock, replies], [pass.token, pass.cursor]);
    pass.lockDone = true;
    if (more === 1) await markPending(this.o.redis, this.o.prefix, this.o.channelId, pass.conversationId);
    this.failures.delete(pass.conversationId);
    pass.settled = true;
  }

  /** Keeps a count of the conversation's given-up replies for operators (the console lists it as stuck), as long as delivery keys are kept. */
  private recordGivenUp(conversationId: string, replyId: string): void {
    const key = givenUpKey(this.o.prefix, conversationId);
    this.o.redis
      .multi()
      .hincrby(key, 'count', 1)
      .hset(key, 'last_reply', replyId, 'at', this.now())
      .expire(key, this.o.config.replyDedupeSeconds)
      .exec()
      .catch((err: unknown) => this.o.logger.warn({ err, conversationId }, 'could not record a given-up callback'));
  }

  /** Counts a failure of the conversation's oldest reply: how long to wait before the next attempt, or undefined when it is given up (attempts used up). */
  private retryWait(conversationId: string, replyId: string, outcome: Extract<Outcome, { kind: 'failed' }>): number | undefined {
    const cfg = this.o.config;
    const last = this.failures.get(conversationId);
    const count = (last?.replyId === replyId ? last.count : 0) + 1;
    if (count >= cfg.callbackMaxAttempts) {
      this.o.logger.error(
        { conversationId, replyId, attempts: count, last: outcome.why },
        'webhook callback failed on every attempt; going on with the next reply',
      );
      this.recordGivenUp(conversationId, replyId);
      return undefined;
    }
    const backoff = backoffMs(count, cfg.callbackRetryBaseMs, cfg.callbackMaxDelayMs);
    // A Retry-After shorter than the backoff (0, a date in the past) does not make the retries hot.
    const wait = Math.min(Math.max(outcome.retryAfterMs ?? 0, backoff), cfg.callbackMaxDelayMs);
    this.failures.set(conversationId, { replyId, count });
    this.o.logger.warn({ conversationId, replyId, attempt: count, waitMs: wait, last: outcome.why }, 'webhook callback failed; retrying');
    return wait;
  }

  private async post(reply: WebhookReply): Promise<Outcome> {
    const body = JSON.stringify(reply);
    try {
      // The stop signal and a timer, each dropped when the request ends: no `AbortSignal.any` over the
      // process-long stop signal, which would keep an entry per callback for the life of the process.
      const res = await this.o.request(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': reply.messageId, ...this.auth, ...signedHeaders(this.secret, body) },
        body,
        signal: this.stopping.signal,
        timeoutMs: this.o.config.callbackTimeoutMs,
        // The receiver dedupes by the idempotency key: a POST a reset pooled connection may have delivered can go again.
        retryStaleSocket: true,
      });
      await res.discard();
      if (res.ok) return { kind: 'taken' };
      if (!retryable(res.status)) return { kind: 'refused', status: res.status };
      const after = retryAfterMs(res.headers['retry-after'], this.now());
      return { kind: 'failed', why: `HTTP ${res.status}`, ...(after !== undefined && { retryAfterMs: after }) };
    } catch (err) {
      return { kind: 'failed', why: err instanceof HttpTimeoutError ? 'timeout' : `network error (${(err as Error).message})` };
    }
  }
}

/** A URL without its user name and password, and those as a Basic `authorization` header. */
function splitCredentials(raw: string): { url: string; auth: Record<string, string> } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { url: raw, auth: {} };
  }
  if (!u.username && !u.password) return { url: raw, auth: {} };
  const user = decodeURIComponent(u.username);
  const password = decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  return { url: u.toString(), auth: { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` } };
}

function parseReply(fields: string[]): WebhookReply | undefined {
  const i = fields.indexOf('data');
  try {
    return i >= 0 ? (JSON.parse(fields[i + 1]!) as WebhookReply) : undefined;
  } catch {
    return undefined;
  }
}
