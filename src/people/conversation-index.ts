/**
 * Which conversations each account wrote in: one hash per account
 * (`<p>:{i:<account>}:conversations`, conversation id → channel id), written
 * by the host when it records a person's message or command, read by the
 * export of a person (`src/export/`). Nothing else knows where a person
 * talked: conversations are keyed by chat, and finding a person's by reading
 * every record would take a scan of the keyspace.
 *
 * Kept per account, not per identity: a link or an unlink moves nothing, and
 * an identity's conversations are its accounts' (an account that is unlinked
 * takes its conversations with it). The channel id is kept because a
 * record's senders are the channel's user ids: the export looks for the
 * account's user id among them.
 *
 * Written after the record, in its own slot: a host that dies in between
 * leaves the message unnoted until the platform redelivers it (a duplicate
 * for ingest, noted again here) or the person writes again. Each process
 * remembers for `rememberMs` what it noted, so a chat costs one write a
 * minute rather than one per message; the price is that a person purged
 * while another host remembered them, and writing again within that minute,
 * is noted there at their next message after it.
 */
import type { RedisClient } from '../redis/connection.js';
import { assertIdentityId, tryAccountId } from './identity.js';

/** One conversation an account wrote in. */
export interface AccountConversation {
  /** The account, `<channel id>:<user id>`. */
  account: string;
  conversationId: string;
  /** The conversation's channel: the account's user id is what follows `<channel id>:`. */
  channelId: string;
}

/** Options of `ConversationIndex`. */
export interface ConversationIndexOptions {
  redis: RedisClient;
  /** Key prefix (`redis.prefix`). Default `sb`. */
  prefix?: string;
  /** How long a process skips writing a pair it noted, in ms. Default 60 000. */
  rememberMs?: number;
  /** The clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** Most pairs a process remembers having noted. */
const REMEMBERED_MAX = 10_000;

/** The index of the conversations `account` wrote in (the account's `{i:…}` slot, beside an unlinked identity's memory and usage). */
export function conversationIndexKey(prefix: string, account: string): string {
  assertIdentityId(account);
  return `${prefix}:{i:${account}}:conversations`;
}

/** Notes, lists and forgets the conversations accounts wrote in. */
export class ConversationIndex {
  private readonly prefix: string;
  private readonly rememberMs: number;
  private readonly now: () => number;
  /** Pairs this process noted, with when the memory of each ends (insertion order: oldest first). */
  private readonly noted = new Map<string, number>();

  constructor(private readonly o: ConversationIndexOptions) {
    this.prefix = o.prefix ?? 'sb';
    this.rememberMs = o.rememberMs ?? 60_000;
    this.now = o.now ?? Date.now;
  }

  /**
   * Notes that user `userId` of channel `channelId` wrote in `conversationId`.
   * A user id no account can be made of is skipped. Throws on a Redis failure
   * (the caller answers 503 and the platform redelivers).
   */
  async note(channelId: string, userId: string, conversationId: string): Promise<void> {
    const account = tryAccountId(channelId, userId);
    if (account === undefined) return;
    const pair = `${account}\n${conversationId}`;
    const now = this.now();
    if ((this.noted.get(pair) ?? 0) > now) return;
    await this.o.redis.hset(conversationIndexKey(this.prefix, account), conversationId, channelId);
    this.noted.delete(pair);
    this.noted.set(pair, now + this.rememberMs);
    if (this.noted.size > REMEMBERED_MAX) this.noted.delete(this.noted.keys().next().value as string);
  }

  /** The conversations `accounts` wrote in, sorted by conversation id then account (one read per account). */
  async of(accounts: readonly string[]): Promise<AccountConversation[]> {
    const all = await Promise.all(accounts.map(async (account) => ({ account, map: await this.o.redis.hgetall(conversationIndexKey(this.prefix, account)) })));
    return all
      .flatMap(({ account, map }) => Object.entries(map).map(([conversationId, channelId]) => ({ account, conversationId, channelId })))
      .sort((a, b) => (a.conversationId === b.conversationId ? (a.account < b.account ? -1 : 1) : a.conversationId < b.conversationId ? -1 : 1));
  }

  /** Forgets where `accounts` wrote (purge of a person: which chats they were in is theirs too). */
  async purge(accounts: readonly string[]): Promise<void> {
    // One key per account, each in its own slot: one DEL each.
    await Promise.all(accounts.map((a) => this.o.redis.del(conversationIndexKey(this.prefix, a))));
    // This process notes them again at their next message (other processes once their memory of it ends).
    const heads = accounts.map((a) => `${a}\n`);
    for (const pair of this.noted.keys()) if (heads.some((h) => pair.startsWith(h))) this.noted.delete(pair);
  }
}
