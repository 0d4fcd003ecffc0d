/**
 * What access keeps in Redis, under the `{people}` hash tag: waiting pairing
 * codes, approved identities, `/link` codes, the guess limiter and the
 * refusals the console lists. Policy decisions are the gate's (gate.ts).
 */
import { z } from 'zod';
import { accountId, type IdentityStore } from '../../src/identity.js';
import { parseJsonOrUndefined } from '../../src/json.js';
import { type PeopleKeys, peopleKeys } from '../../src/keys.js';
import type { RedisClient } from '../../src/redis.js';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { codeHash, newCode, normalizeCode, sameCode } from './codes.js';

/** Limits of the access store (the `access` config section's). */
export interface AccessLimits {
  /** Code lifetime, in seconds. */
  codeTtlSeconds: number;
  /** A refused account is answered once per window, in seconds. */
  noticeWindowSeconds: number;
  /** Most pairing codes waiting at once. */
  maxPendingCodes: number;
  /** Wrong codes one account may send per `guessWindowSeconds`. */
  maxGuesses: number;
  /** The guess window, in seconds. */
  guessWindowSeconds: number;
}

/** Most refusals the console's list keeps (older ones are trimmed). */
const REFUSALS_KEPT = 500;

const pairingRecordSchema = z.object({
  code: z.string(),
  account: z.string(),
  channel: z.string(),
  userId: z.string(),
  name: z.string().optional(),
  conversationId: z.string(),
  at: z.number(),
});
/** What a waiting pairing code stands for. */
export type PairingRecord = z.infer<typeof pairingRecordSchema>;

const linkRecordSchema = z.object({ code: z.string(), account: z.string() });

/** A refused message as the console lists it (no message text). */
export interface Refusal {
  at: number;
  channel: string;
  chatId: string;
  userId: string;
  reason: string;
}

/** What a pairing request got. `quiet`: the account was answered within the window already. */
export type PairingRequest = { kind: 'code' | 'pending'; code: string } | { kind: 'full' } | { kind: 'quiet' };

/** What a code sent by a person got. */
export type CodeOutcome<T> = { kind: 'ok'; value: T } | { kind: 'unknown' } | { kind: 'rate-limited'; retryAfterSeconds: number };

/** Access's Redis state. */
export class AccessStore {
  readonly keys: PeopleKeys;
  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    readonly limits: AccessLimits,
    readonly identities: IdentityStore,
  ) {
    this.keys = peopleKeys(prefix);
  }

  /** The account's identity and whether it was approved (one round trip). */
  async approved(channel: string, userId: string): Promise<{ identity: string; approved: boolean }> {
    const account = accountId(channel, userId);
    const r = checkReply('access-check', await runScript(this.redis, 'access-check', [this.keys.links], [this.keys.base, account]));
    return { identity: String(r[0]), approved: Number(r[1]) === 1 };
  }

  /** Gives an unknown account a pairing code, or reminds it of its own, at most once per notice window. */
  async requestCode(record: Omit<PairingRecord, 'code' | 'at'>): Promise<PairingRequest> {
    const code = newCode();
    const full: PairingRecord = { ...record, code, at: Date.now() };
    const r = checkReply(
      'access-request',
      await runScript(
        this.redis,
        'access-request',
        [this.keys.codes],
        [
          this.keys.base,
          record.account,
          code,
          codeHash(code),
          JSON.stringify(full),
          this.limits.codeTtlSeconds * 1000,
          this.limits.noticeWindowSeconds,
          this.limits.maxPendingCodes,
        ],
      ),
    );
    const kind = String(r[0]);
    if (kind === 'code' || kind === 'pending') return { kind, code: String(r[1]) };
    return { kind: kind === 'full' ? 'full' : 'quiet' };
  }

  /** Whether a refused account is to be answered now: true once per notice window. */
  async firstNotice(account: string): Promise<boolean> {
    return (await this.redis.set(this.keys.notice(account), '1', 'EX', this.limits.noticeWindowSeconds, 'NX')) === 'OK';
  }

  /** Notes a refused message for the console (capped list; no text). */
  async noteRefusal(r: Omit<Refusal, 'at'>): Promise<void> {
    await this.redis.xadd(this.keys.refused, 'MAXLEN', '~', REFUSALS_KEPT, '*', 'r', JSON.stringify({ ...r, at: Date.now() }));
  }

  /** The newest refusals, newest first. */
  async refusals(count = 50): Promise<Refusal[]> {
    const rows = await this.redis.xrevrange(this.keys.refused, '+', '-', 'COUNT', count);
    return rows.map(([, fields]) => parseJsonOrUndefined(fields[1] ?? '') as Refusal).filter(Boolean);
  }

  /**
   * Approves the pairing code `text` (as typed). `guesser`: the account that
   * sent it, rate-limited; undefined for the operator (console, CLI).
   */
  async approve(text: string, guesser?: string): Promise<CodeOutcome<{ record: PairingRecord; identity: string }>> {
    return this.withGuess(guesser, async () => {
      const code = normalizeCode(text);
      if (!code) return undefined;
      const hash = codeHash(code);
      const record = pairingRecordSchema.safeParse(parseJsonOrUndefined((await this.redis.get(this.keys.code(hash))) ?? ''));
      if (!record.success || !sameCode(record.data.code, code)) return undefined;
      const r = checkReply('access-approve', await runScript(this.redis, 'access-approve', [this.keys.codes], [this.keys.base, hash, record.data.account]));
      return r[0] === 'paired' ? { record: record.data, identity: String(r[1]) } : undefined;
    });
  }

  /** Approves an identity directly (the operator, by identity id). */
  async pair(identity: string): Promise<void> {
    await this.redis.sadd(this.keys.paired, identity);
  }

  /** Withdraws an identity's approval. Returns whether it was approved. */
  async unpair(identity: string): Promise<boolean> {
    return (await this.redis.srem(this.keys.paired, identity)) === 1;
  }

  /** Whether an identity was approved. */
  async isPaired(identity: string): Promise<boolean> {
    return (await this.redis.sismember(this.keys.paired, identity)) === 1;
  }

  /** Approved identities (up to `count`, any order). */
  async pairedIdentities(count = 200): Promise<string[]> {
    const [, ids] = await this.redis.sscan(this.keys.paired, '0', 'COUNT', count);
    return ids.slice(0, count);
  }

  /** Pairing codes waiting for approval, soonest to expire first, with when each expires (ms; the codes index's score). */
  async waitingCodes(count = 100): Promise<Array<PairingRecord & { expiresAt: number }>> {
    const flat = await this.redis.zrangebyscore(this.keys.codes, Date.now(), '+inf', 'WITHSCORES', 'LIMIT', 0, count);
    if (flat.length === 0) return [];
    const hashes = flat.filter((_, i) => i % 2 === 0);
    const raw = await this.redis.mget(...hashes.map((h) => this.keys.code(h)));
    return raw.flatMap((r, i) => {
      const p = pairingRecordSchema.safeParse(parseJsonOrUndefined(r ?? ''));
      return p.success ? [{ ...p.data, expiresAt: Number(flat[2 * i + 1]) }] : [];
    });
  }

  /** A `/link` code for `account` (the same one while it is valid). */
  async linkCode(account: string): Promise<string> {
    const ttlMs = this.limits.codeTtlSeconds * 1000;
    const code = newCode();
    const set = await this.redis.set(this.keys.linkPending(account), code, 'PX', ttlMs, 'NX');
    if (set !== 'OK') {
      const existing = await this.redis.get(this.keys.linkPending(account));
      if (existing) return existing;
      await this.redis.set(this.keys.linkPending(account), code, 'PX', ttlMs);
    }
    await this.redis.set(this.keys.linkCode(codeHash(code)), JSON.stringify({ code, account }), 'PX', ttlMs);
    return code;
  }

  /**
   * Confirms a `/link` code from `account`: it joins the identity of the
   * account that gave the code. `same`: the code is this account's own.
   */
  async confirmLink(account: string, text: string): Promise<CodeOutcome<{ kind: 'linked' | 'same'; identity: string; other: string }>> {
    return this.withGuess(account, async () => {
      const code = normalizeCode(text);
      if (!code) return undefined;
      const hash = codeHash(code);
      const record = linkRecordSchema.safeParse(parseJsonOrUndefined((await this.redis.get(this.keys.linkCode(hash))) ?? ''));
      if (!record.success || !sameCode(record.data.code, code)) return undefined;
      const other = record.data.account;
      if (other === account) return { kind: 'same' as const, identity: await this.identities.resolveAccount(account), other };
      const linked = await this.identities.link(account, other);
      await this.redis.del(this.keys.linkCode(hash), this.keys.linkPending(other));
      return { kind: 'linked' as const, identity: linked.identity, other };
    });
  }

  /**
   * Runs `attempt` unless `guesser` is over its wrong-guess limit. Every
   * attempt counts first (atomic INCR, so parallel guesses cannot slip past
   * the limit); a right one is taken back.
   */
  private async withGuess<T>(guesser: string | undefined, attempt: () => Promise<T | undefined>): Promise<CodeOutcome<T>> {
    const key = guesser === undefined ? undefined : this.keys.guesses(guesser);
    if (key) {
      const res = await this.redis.multi().incr(key).expire(key, this.limits.guessWindowSeconds, 'NX').ttl(key).exec();
      const count = Number(res?.[0]?.[1] ?? 0);
      if (count > this.limits.maxGuesses) return { kind: 'rate-limited', retryAfterSeconds: Math.max(1, Number(res?.[2]?.[1] ?? 1)) };
    }
    const value = await attempt();
    if (value === undefined) return { kind: 'unknown' };
    if (key) await this.redis.decr(key);
    return { kind: 'ok', value };
  }
}
