/**
 * What access keeps in Redis, under the `{people}` hash tag: waiting pairing
 * codes, approved identities, `/link` codes, the guess limiter and the
 * refusals the console lists. Codes are kept only as their SHA-256: the
 * person is shown the code once and passes it on. Policy decisions are the
 * gate's (gate.ts).
 */
import { z } from 'zod';
import { ScriptError } from '../../src/errors.js';
import { parseJsonOrUndefined } from '../../src/json.js';
import { accountId, type IdentityStore } from '../../src/people/identity.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { type PeopleKeys, peopleKeys } from '../../src/redis/keys.js';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { codeHash, newCode, normalizeCode } from './codes.js';

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

// Records written before codes were kept as hashes only also held the code: zod drops it on read.
const pairingRecordSchema = z.object({
  account: z.string(),
  channel: z.string(),
  userId: z.string(),
  name: z.string().optional(),
  conversationId: z.string(),
  at: z.number(),
});
/** What a waiting pairing code stands for. */
export type PairingRecord = z.infer<typeof pairingRecordSchema>;

/** A refused message as the console lists it (no message text). */
export interface Refusal {
  at: number;
  channel: string;
  chatId: string;
  userId: string;
  reason: string;
}

/**
 * What a pairing request got. `code`: a fresh code, to show now (it is not
 * kept, so this is the only time it can be shown). `pending`: the account's
 * earlier code still waits, `expiresInSeconds` more. `quiet`: the account was
 * answered within the window already.
 */
export type PairingRequest = { kind: 'code'; code: string } | { kind: 'pending'; expiresInSeconds: number } | { kind: 'full' } | { kind: 'quiet' };

/**
 * What confirming a `/link` code did. `linked`: the sender joined `identity`
 * (the code maker's, `other`). `same`: they were one identity already.
 * `refused`: the sender is approved and the maker is not, so nothing was
 * linked. `own`: the sender made the code (it stays valid).
 */
export type LinkOutcome =
  | { kind: 'linked'; identity: string; from: string; other: string }
  | { kind: 'same'; identity: string; other: string }
  | { kind: 'refused'; other: string }
  | { kind: 'own' };

/** What a code sent by a person got. */
/** What approving a code did: `paired`, or nothing because it was given on `channel`, not the approver's (it stays valid). */
export type Approval = { kind: 'paired'; record: PairingRecord; identity: string } | { kind: 'elsewhere'; channel: string };

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

  /** Gives an unknown account a pairing code, or tells it its code still waits, at most once per notice window. */
  async requestCode(record: Omit<PairingRecord, 'at'>): Promise<PairingRequest> {
    const code = newCode();
    const full: PairingRecord = { ...record, at: Date.now() };
    const r = checkReply(
      'access-request',
      await runScript(
        this.redis,
        'access-request',
        [this.keys.codes],
        [
          this.keys.base,
          record.account,
          codeHash(code),
          JSON.stringify(full),
          this.limits.codeTtlSeconds * 1000,
          this.limits.noticeWindowSeconds,
          this.limits.maxPendingCodes,
        ],
      ),
    );
    const kind = String(r[0]);
    if (kind === 'code') return { kind, code };
    if (kind === 'pending') return { kind, expiresInSeconds: Math.ceil(Number(r[1]) / 1000) };
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
   * `channel`: the approver's channel, whose codes alone it approves
   * (`elsewhere` for another channel's code, which stays valid); undefined:
   * any channel (console, CLI).
   */
  async approve(text: string, guesser?: string, channel?: string): Promise<CodeOutcome<Approval>> {
    return this.withGuess(guesser, async (): Promise<Approval | undefined> => {
      const code = normalizeCode(text);
      if (!code) return undefined;
      const r = checkReply('access-approve', await runScript(this.redis, 'access-approve', [this.keys.codes], [this.keys.base, codeHash(code), channel ?? '']));
      // A real code, though not this approver's: not a wrong guess.
      if (r[0] === 'elsewhere') return { kind: 'elsewhere', channel: String(r[1]) };
      if (r[0] !== 'paired') return undefined;
      const record = pairingRecordSchema.safeParse(parseJsonOrUndefined(String(r[2])));
      // The script read the account from the same JSON: a record zod refuses was written by another build.
      if (!record.success) throw new ScriptError('access-approve', `unreadable pairing record for identity ${String(r[1])}`);
      return { kind: 'paired', record: record.data, identity: String(r[1]) };
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

  /** A fresh `/link` code for `account`; it replaces the account's earlier one. Show it only in a direct chat. */
  async linkCode(account: string, standing: boolean): Promise<string> {
    const code = newCode();
    checkReply(
      'access-link-code',
      await runScript(
        this.redis,
        'access-link-code',
        [this.keys.links],
        [this.keys.base, account, codeHash(code), this.limits.codeTtlSeconds * 1000, standing ? '1' : '0'],
      ),
    );
    return code;
  }

  /**
   * Confirms a `/link` code from `account` in one script (checked, used up
   * and linked at once: of two accounts sending one code, one links). The
   * sender joins the identity of the account that asked for the code; then
   * the identity hooks are told.
   */
  async confirmLink(account: string, text: string, standing: boolean): Promise<CodeOutcome<LinkOutcome>> {
    return this.withGuess(account, async (): Promise<LinkOutcome | undefined> => {
      const code = normalizeCode(text);
      if (!code) return undefined;
      const r = checkReply(
        'access-link',
        await runScript(this.redis, 'access-link', [this.keys.links], [this.keys.base, codeHash(code), account, standing ? '1' : '0']),
      );
      switch (r[0]) {
        case 'linked': {
          const out = { kind: 'linked' as const, identity: String(r[1]), from: String(r[2]), other: String(r[3]) };
          await this.identities.tellLinked({ from: out.from, into: out.identity });
          return out;
        }
        case 'same':
          return { kind: 'same', identity: String(r[1]), other: String(r[2]) };
        case 'refused':
          return { kind: 'refused', other: String(r[1]) };
        case 'own':
          return { kind: 'own' };
        default:
          return undefined;
      }
    });
  }

  /** Revokes the `/link` code `text` (as posted where others could read it). Returns whether there was one. */
  async revokeLinkCode(text: string): Promise<boolean> {
    const code = normalizeCode(text);
    if (!code) return false;
    const r = checkReply('access-link-revoke', await runScript(this.redis, 'access-link-revoke', [this.keys.links], [this.keys.base, codeHash(code)]));
    return r[0] === 'revoked';
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
