/**
 * Who a sender is across channels. An account is one platform user on one
 * channel, `<channel id>:<user id>`; its identity id is the account itself
 * until the person links it to another account (`/link`, or an operator in
 * the console), after which every linked account resolves to one identity
 * id. What follows a person (memory, budgets, access) is keyed by the
 * identity id; conversations stay per channel.
 *
 * Links live in Redis under the `{people}` hash tag (`peopleKeys`), so a link
 * or a purge is one script in one cluster slot; an account that was never
 * linked costs nothing to store.
 */
import { InvalidInputError } from '../errors.js';
import type { RedisClient } from '../redis/connection.js';
import { peopleKeys } from '../redis/keys.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';

/** Longest accepted channel id, in characters. */
const MAX_CHANNEL_ID_LENGTH = 128;
/** Longest accepted platform user id, in characters (the record's sender id limit). */
const MAX_USER_ID_LENGTH = 128;
/** Longest accepted identity id, in characters: a channel id, `:` and a user id. */
export const MAX_IDENTITY_ID_LENGTH = MAX_CHANNEL_ID_LENGTH + 1 + MAX_USER_ID_LENGTH;

// Identity ids go into key names: no braces (a hash tag), no whitespace, no control characters.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is what this pattern is for.
const PART_RE = /^[^\s{}\u0000-\u001f]+$/;

/** Throws InvalidInputError unless `id` is a usable identity id (1-257 characters without whitespace or braces). */
export function assertIdentityId(id: string): void {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_IDENTITY_ID_LENGTH || !PART_RE.test(id)) {
    throw new InvalidInputError(`identity id must be 1-${MAX_IDENTITY_ID_LENGTH} characters without whitespace or braces`);
  }
}

/**
 * The account of a platform user on a channel, `<channel id>:<user id>`: also
 * its identity id while it is not linked. Throws InvalidInputError for an
 * empty or over-long part, or one with whitespace or braces.
 */
export function accountId(channelId: string, userId: string): string {
  if (typeof channelId !== 'string' || channelId.length === 0 || channelId.length > MAX_CHANNEL_ID_LENGTH || !PART_RE.test(channelId)) {
    throw new InvalidInputError(`channel id must be 1-${MAX_CHANNEL_ID_LENGTH} characters without whitespace or braces`);
  }
  if (typeof userId !== 'string' || userId.length === 0 || userId.length > MAX_USER_ID_LENGTH || !PART_RE.test(userId)) {
    throw new InvalidInputError(`user id must be 1-${MAX_USER_ID_LENGTH} characters without whitespace or braces`);
  }
  return `${channelId}:${userId}`;
}

/** `accountId`, or undefined where it would throw InvalidInputError. */
export function tryAccountId(channelId: string, userId: string): string | undefined {
  try {
    return accountId(channelId, userId);
  } catch (err) {
    if (err instanceof InvalidInputError) return undefined;
    throw err;
  }
}

/** What a link did: `linked` moved the joining account's identity (`from`) into `identity`; `same`: they were one already. */
export type LinkResult = { kind: 'linked'; identity: string; from: string } | { kind: 'same'; identity: string };

/**
 * Told when identities change, so stores keyed by identity (memory, usage)
 * can follow. Hooks run after the change is committed; one that throws is
 * reported by the call that ran it (the change stands).
 */
export interface IdentityHooks {
  /** Identity `from` was merged into `into` (its accounts now resolve to `into`). Move what you keep under `from`. */
  linked?(change: { from: string; into: string }): Promise<void> | void;
  /**
   * Identity `identity` was purged: delete what you keep for it. `accounts`:
   * the accounts it had (its own id among them), each now its own identity
   * again, for what is kept per account.
   */
  purged?(identity: string, accounts: readonly string[]): Promise<void> | void;
}

/** Options of `IdentityStore`. */
export interface IdentityStoreOptions {
  redis: RedisClient;
  /** Key prefix (config `redis.prefix`). Default `sb`. */
  prefix?: string;
}

/** Resolves, links and purges identities. Holds no state of its own besides its hooks. */
export class IdentityStore {
  private readonly redis: RedisClient;
  private readonly keys: ReturnType<typeof peopleKeys>;
  private readonly hooks: IdentityHooks[] = [];

  constructor(opts: IdentityStoreOptions) {
    this.redis = opts.redis;
    this.keys = peopleKeys(opts.prefix ?? 'sb');
  }

  /** Registers hooks (memory, usage) told of links and purges. Returns a function that removes them. */
  onChange(hooks: IdentityHooks): () => void {
    this.hooks.push(hooks);
    return () => {
      const i = this.hooks.indexOf(hooks);
      if (i >= 0) this.hooks.splice(i, 1);
    };
  }

  /**
   * The identity id of user `userId` on channel `channelId`: the linked
   * identity, else the account itself (`<channel id>:<user id>`). One HGET.
   * Throws InvalidInputError for a bad channel or user id.
   */
  async resolve(channelId: string, userId: string): Promise<string> {
    const account = accountId(channelId, userId);
    return (await this.redis.hget(this.keys.links, account)) ?? account;
  }

  /**
   * Like `resolve`, but undefined for a user id no identity can be made of
   * (a channel may pass any string): the caller goes on without per-person
   * state rather than failing the message or the run. Redis errors still throw.
   */
  async tryResolve(channelId: string, userId: string): Promise<string | undefined> {
    const account = tryAccountId(channelId, userId);
    return account === undefined ? undefined : ((await this.redis.hget(this.keys.links, account)) ?? account);
  }

  /** The identity id of an account (`<channel>:<user id>`). Throws InvalidInputError for a bad account. */
  async resolveAccount(account: string): Promise<string> {
    assertIdentityId(account);
    return (await this.redis.hget(this.keys.links, account)) ?? account;
  }

  /** The identity ids of several users of one channel, in order (one HMGET). */
  async resolveMany(channelId: string, userIds: readonly string[]): Promise<string[]> {
    if (userIds.length === 0) return [];
    const accounts = userIds.map((u) => accountId(channelId, u));
    const linked = await this.redis.hmget(this.keys.links, ...accounts);
    return accounts.map((a, i) => linked[i] ?? a);
  }

  /** The accounts of an identity, sorted: the linked ones, or just the identity's own account when none is linked. */
  async accounts(identity: string): Promise<string[]> {
    assertIdentityId(identity);
    const members = await this.redis.smembers(this.keys.members(identity));
    return members.length > 0 ? members.sort() : [identity];
  }

  /**
   * Links `account` (`<channel>:<user id>`) into the identity of `target`:
   * every account of `account`'s identity now resolves to `target`'s. Then
   * tells the hooks (`linked`). Throws InvalidInputError for a bad account.
   */
  async link(account: string, target: string): Promise<LinkResult> {
    assertIdentityId(account);
    assertIdentityId(target);
    const r = checkReply('identity-link', await runScript(this.redis, 'identity-link', [this.keys.links], [this.keys.base, account, target]));
    if (r[0] === 'same') return { kind: 'same', identity: String(r[1]) };
    const result: LinkResult = { kind: 'linked', identity: String(r[1]), from: String(r[2]) };
    await this.tellLinked({ from: result.from, into: result.identity });
    return result;
  }

  /**
   * Tells the hooks (`linked`) of a link another script committed: access's
   * `/link`, which checks and uses up its code in the same script as the
   * merge (includes/identity-merge.lua). Throws the first hook's failure.
   */
  async tellLinked(change: { from: string; into: string }): Promise<void> {
    await this.tell((h) => h.linked?.(change));
  }

  /**
   * Takes `account` out of its identity; it is its own identity again.
   * Returns the identity it left, or undefined when it was not linked.
   */
  async unlink(account: string): Promise<string | undefined> {
    assertIdentityId(account);
    const r = checkReply('identity-unlink', await runScript(this.redis, 'identity-unlink', [this.keys.links], [this.keys.base, account]));
    return r[0] === 'unlinked' ? String(r[1]) : undefined;
  }

  /**
   * Purges an identity: its links are removed (each account is its own
   * identity again), then the hooks delete what they keep (`purged`:
   * access, memory, usage, where the accounts wrote). Returns the accounts
   * that were linked into it.
   */
  async purge(identity: string): Promise<string[]> {
    assertIdentityId(identity);
    const r = checkReply('identity-purge', await runScript(this.redis, 'identity-purge', [this.keys.links], [this.keys.base, identity]));
    const linked = r.slice(1).map(String);
    const accounts = [...new Set([identity, ...linked])];
    await this.tell((h) => h.purged?.(identity, accounts));
    return linked;
  }

  /** Runs every hook; the first failure is thrown after all ran. */
  private async tell(call: (h: IdentityHooks) => Promise<void> | void): Promise<void> {
    const results = await Promise.allSettled(this.hooks.map(async (h) => call(h)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
