/**
 * Export, the counterpart of purge: everything stored about a conversation
 * or a person, as one JSON document (format `steerbot.export`, version 1,
 * docs/people.md#export), written a piece at a time (`json-stream.ts`) so a
 * long record never sits in memory. Read-only: an export writes nothing.
 *
 * A conversation's export is everything the conversation holds (the record
 * with every member's messages in a group; it is the operator's), with the
 * conversations features keep for it and purge with it (a subagent's,
 * `ExportPart.conversation`). A person's
 * export holds what is kept for them (accounts, approval, and what each
 * feature keeps: memory, budget counters, the schedules they own; `parts`)
 * and the conversations they wrote in: in
 * full (with those kept for it) where only they wrote, in a direct chat; elsewhere (a group, or a chat
 * where someone else wrote too) their own messages and commands only, so one
 * person's export never hands out another's words.
 *
 * Secrets are never read: pairing and link codes (kept only as hashes),
 * API tokens and their digests live in keys an export does not touch.
 */
import { channelResolver } from '../channel.js';
import { type AccountConversation, ConversationIndex } from '../people/conversation-index.js';
import { IdentityStore, tryAccountId } from '../people/identity.js';
import type { SeqEntry } from '../record/entries.js';
import type { RedisClient } from '../redis/connection.js';
import { conversationKeys, peopleKeys } from '../redis/keys.js';
import { ConversationParts, type ExportReader, humanSender, storedState } from './conversation.js';
import { arrayOfStreams, type Member, Streamed, streamObject } from './json-stream.js';
import type { ExportPart } from './part.js';

/** The `format` of every export. */
export const EXPORT_FORMAT = 'steerbot.export';
/** The format's version: a reader refuses a version it does not know. */
export const EXPORT_VERSION = 1;

/** Options of `Exporter`. */
export interface ExporterOptions {
  redis: RedisClient;
  /** Key prefix (`redis.prefix`). Default `sb`. */
  prefix?: string;
  /**
   * Ids of the configured channels (`webhook:crm` has a `:`): a direct chat's
   * person is found from the record's sender on the conversation's channel,
   * for their memory. Default: none (a conversation's export then names no person).
   */
  channels?: Iterable<string>;
  /** Record entries read per round trip, and written per piece. Default 500. */
  pageSize?: number;
  /** The clock, ms since the epoch (`exportedAt`). Default `Date.now`. */
  now?: () => number;
  /** The features' parts (memory, budgets, schedules), in order. Default: none. */
  parts?: readonly ExportPart[];
}

/** What opening an export found: the document to write, or why there is none (nothing was written). */
export type ExportOpening =
  /** `subject`: the conversation, or the identity the id resolved to; `chunks`: the document, read as it is pulled. */
  | { kind: 'found'; subject: string; chunks: AsyncIterable<string> }
  /** A purge left only its tombstone. */
  | { kind: 'purged' }
  /** Nothing is stored under that id. */
  | { kind: 'not_found' };

/** Opens exports of conversations and people. Holds no state besides its options. */
export class Exporter {
  private readonly r: ExportReader;
  private readonly identities: IdentityStore;
  private readonly parts: readonly ExportPart[];
  private readonly index: ConversationIndex;
  private readonly channelOf: (conversationId: string) => string | undefined;
  private readonly now: () => number;

  constructor(o: ExporterOptions) {
    const prefix = o.prefix ?? 'sb';
    this.r = { redis: o.redis, prefix, pageSize: o.pageSize ?? 500 };
    this.identities = new IdentityStore({ redis: o.redis, prefix });
    this.parts = o.parts ?? [];
    this.index = new ConversationIndex({ redis: o.redis, prefix });
    this.channelOf = channelResolver(o.channels ?? []);
    this.now = o.now ?? Date.now;
  }

  /** The export of conversation `id`. Throws InvalidInputError for a bad id (nothing read). */
  async conversation(id: string): Promise<ExportOpening> {
    const stored = await storedState(this.r.redis, conversationKeys(this.r.prefix, id));
    if (stored !== 'stored') return { kind: stored };
    const kept = this.kept(id);
    const parts = await ConversationParts.open(this.r, id, undefined, kept.seen);
    let person: Promise<string | undefined> | undefined;
    // Known once the record went by (who wrote); asked by any number of members, read once.
    const personOnce = () => {
      person ??= this.directPerson(parts);
      return person;
    };
    const members: Member[] = [
      ...this.head(),
      ['conversation', () => id],
      ['record', () => parts.record()],
      ...parts.members(),
      ...kept.members,
      ...this.parts.flatMap((p) => p.directPerson?.(personOnce) ?? []),
    ];
    return { kind: 'found', subject: id, chunks: streamObject(members) };
  }

  /**
   * The export of a person: `id` is an identity or any account of one.
   * Throws InvalidInputError for a bad id (nothing read).
   */
  async identity(id: string): Promise<ExportOpening> {
    const identity = await this.identities.resolveAccount(id);
    const accounts = await this.identities.accounts(identity);
    const [held, wrote] = await Promise.all([this.holdsAnything(identity), this.index.of(accounts)]);
    if (!held && wrote.length === 0) return { kind: 'not_found' };
    const { redis, prefix } = this.r;
    const members: Member[] = [
      ...this.head(),
      ['identity', () => identity],
      ['query', () => (id === identity ? undefined : id)],
      ['accounts', () => accounts],
      ['approved', async () => (await redis.sismember(peopleKeys(prefix).paired, identity)) === 1],
      ...this.parts.flatMap((p) => p.person?.(identity) ?? []),
      ['conversations', () => arrayOfStreams(this.wroteIn(wrote))],
    ];
    return { kind: 'found', subject: identity, chunks: streamObject(members) };
  }

  private head(): Member[] {
    return [
      ['format', () => EXPORT_FORMAT],
      ['version', () => EXPORT_VERSION],
      ['exportedAt', () => new Date(this.now()).toISOString()],
    ];
  }

  /**
   * The features' parts of conversation `id` written whole: the conversations
   * they keep for it (a subagent's), each whole, and what they see of its
   * record as it is read (which those are).
   */
  private kept(id: string): { seen: (entry: SeqEntry) => void; members: Member[] } {
    const document = async (child: string): Promise<Streamed> => {
      const parts = await ConversationParts.open(this.r, child);
      return new Streamed(streamObject([['conversation', () => child], ['record', () => parts.record()], ...parts.members()]));
    };
    const kept = this.parts.flatMap((p) => (p.conversation ? [p.conversation(id, document)] : []));
    return {
      seen: (entry) => {
        for (const k of kept) k.seen?.(entry);
      },
      members: kept.flatMap((k) => k.members),
    };
  }

  /** The identity of a direct chat's person (one person wrote, never in a group); undefined elsewhere, or when the channel is not configured. */
  private async directPerson(parts: ConversationParts): Promise<string | undefined> {
    const w = parts.writers;
    const channel = this.channelOf(parts.id);
    if (w.group || w.several || w.first === undefined || channel === undefined) return undefined;
    const account = tryAccountId(channel, w.first);
    if (account === undefined) return undefined;
    return this.identities.resolveAccount(account);
  }

  /** Whether anything is kept for the identity itself: links, an approval, or what a feature keeps (notes, counters, schedules). */
  private async holdsAnything(identity: string): Promise<boolean> {
    const { redis, prefix } = this.r;
    const people = peopleKeys(prefix);
    // Each key in its own slot (people, the identity): one EXISTS each.
    const found = await Promise.all([
      redis.exists(people.members(identity)).then((n) => n > 0),
      redis.sismember(people.paired, identity).then((n) => n > 0),
      ...this.parts.flatMap((p) => (p.holds ? [p.holds(identity)] : [])),
    ]);
    return found.some(Boolean);
  }

  /**
   * The conversations the person wrote in, one after the other. Each record
   * is read twice: once to learn who wrote (up to the seq it had then), once
   * to write it, up to the same seq, in full or only the person's entries.
   */
  private async *wroteIn(wrote: readonly AccountConversation[]): AsyncGenerator<Streamed> {
    for (const [conversationId, rows] of groupByConversation(wrote)) {
      if ((await storedState(this.r.redis, conversationKeys(this.r.prefix, conversationId))) !== 'stored') continue;
      yield new Streamed(this.oneWroteIn(conversationId, rows));
    }
  }

  /**
   * One conversation the person wrote in. The survey of who wrote gives an
   * empty piece a page, so a writer that went away (a closed download)
   * stops it there rather than after the whole record.
   */
  private async *oneWroteIn(conversationId: string, rows: readonly AccountConversation[]): AsyncGenerator<string> {
    const own = new Set(rows.flatMap((a) => (a.account.startsWith(`${a.channelId}:`) ? [a.account.slice(a.channelId.length + 1)] : [])));
    const kept = this.kept(conversationId);
    const parts = await ConversationParts.open(this.r, conversationId, own, kept.seen);
    for await (const _page of parts.survey()) yield '';
    const { group, strangers } = parts.writers;
    const head: Member[] = [
      ['conversation', () => conversationId],
      ['accounts', () => rows.map((a) => a.account)],
    ];
    const members: Member[] =
      group || strangers
        ? [
            ...head,
            ['scope', () => 'own-messages'],
            ['reason', () => (group ? 'group' : 'other-senders')],
            // An entry this build cannot read cannot be told to be theirs: left out here.
            ['record', () => parts.record((e) => e !== undefined && own.has(humanSender(e) ?? ''))],
          ]
        : [...head, ['scope', () => 'full'], ['record', () => parts.record()], ...parts.members(), ...kept.members];
    yield* streamObject(members);
  }
}

/** Index rows by conversation, in the index's order. */
function groupByConversation(rows: readonly AccountConversation[]): Map<string, AccountConversation[]> {
  const out = new Map<string, AccountConversation[]>();
  for (const row of rows) out.set(row.conversationId, [...(out.get(row.conversationId) ?? []), row]);
  return out;
}
