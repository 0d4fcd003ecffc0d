/**
 * The access rule: who may talk in a chat under `access.channels.<id>`. One
 * decision, asked in two places: the host's gate (host/access/gate.ts) for
 * every message, with the sender and the chat the platform names, and a
 * schedule's fire (src/schedules/fire-worker.ts), for the person its fires are
 * charged to in the conversation it was made in, so a person or a group that
 * lost access stops being answered by both at once.
 *
 * `accessRuling` is the rule itself, pure; `AccessRules` asks it for an
 * identity and a conversation from the current configuration and the access
 * store's approvals (the `{people}` keys the host's `AccessStore` writes).
 */
import { type ChannelSettings, channelResolver } from '../channel.js';
import type { AccessConfig, ChannelAccess } from '../config/schema.js';
import type { RedisClient } from '../redis/connection.js';
import { peopleKeys } from '../redis/keys.js';
import { type IdentityStore, tryAccountId } from './identity.js';

/** Why someone may not talk in a chat. */
export type RefusalReason = 'not-allowed' | 'not-paired' | 'group-not-allowed';

/** What the rule knows of the chat: a direct chat, or a group chat and whether it is listed in `groups`. */
export type AccessChat = { kind: 'direct' } | { kind: 'group'; listed: boolean };

/** What the rule knows of the speaker. */
export interface AccessSpeaker {
  /** One of the channel's operator-made admins (`admins`). */
  admin: boolean;
  /** Listed in `users`. */
  listed: boolean;
}

/**
 * The rule's answer: `approval` means allowed only if the speaker's identity
 * was approved (policy `pairing`), else refused `not-paired`. The store is
 * the caller's to read, so a rule that needs no approval costs no round trip.
 */
export type AccessRuling = { kind: 'allow' } | { kind: 'refuse'; reason: RefusalReason } | { kind: 'approval' };

/** A decision with the approval read: allowed, or refused and why. */
export type AccessDecision = { kind: 'allow' } | { kind: 'refuse'; reason: RefusalReason };

const ALLOW = { kind: 'allow' } as const;
const APPROVAL = { kind: 'approval' } as const;
const refuse = (reason: RefusalReason) => ({ kind: 'refuse', reason }) as const;

/**
 * Whether a speaker may talk in a chat of a channel with these settings
 * (undefined: a channel `access` does not list, so `open`). Admins talk in
 * any chat; a group chat must be listed, and with `members` its speaker is
 * checked as in a direct chat; in a direct chat the speaker must be listed
 * or (pairing) approved.
 */
export function accessRuling(access: ChannelAccess | undefined, chat: AccessChat, speaker: AccessSpeaker): AccessRuling {
  if (!access || access.policy === 'open') return ALLOW;
  if (speaker.admin) return ALLOW;
  if (chat.kind === 'group') {
    if (!chat.listed) return refuse('group-not-allowed');
    if (!access.members) return ALLOW;
  }
  if (speaker.listed) return ALLOW;
  return access.policy === 'pairing' ? APPROVAL : refuse('not-allowed');
}

// One resolver per channel's settings (the configuration's own objects, loaded once), not one per message.
const groupResolvers = new WeakMap<ChannelAccess, Map<string, (conversationId: string) => string | undefined>>();

/** Whether `conversationId` is a chat listed in `access.groups` of its channel, or a thread of one (by the rule bindings use). */
export function inListedGroup(access: ChannelAccess, channelId: string, conversationId: string): boolean {
  let byChannel = groupResolvers.get(access);
  if (!byChannel) groupResolvers.set(access, (byChannel = new Map()));
  let resolve = byChannel.get(channelId);
  if (!resolve) byChannel.set(channelId, (resolve = channelResolver(access.groups.map((group) => `${channelId}:${group}`))));
  return resolve(conversationId) !== undefined;
}

/** Whether an identity was approved (paired): one SISMEMBER on the access store's set. */
export async function isApproved(redis: RedisClient, prefix: string, identity: string): Promise<boolean> {
  return (await redis.sismember(peopleKeys(prefix).paired, identity)) === 1;
}

/** Options of `AccessRules`. */
export interface AccessRulesOptions {
  /** The configuration's `access` section (as this process loaded it). */
  access: AccessConfig;
  identities: IdentityStore;
  /** Reads the approvals. */
  redis: RedisClient;
  /** Key prefix (`redis.prefix`). */
  prefix: string;
  /** Channel ids besides those `access` lists, so a conversation's channel is its longest id (`webhook:crm`, not `webhook`). Default none. */
  channelIds?: Iterable<string>;
  /** The settings of a conversation's channel (its plugin's `admins`, `unverifiedSenders`); `access.channels.<id>.admins` count anyway. */
  settingsOf?: (conversationId: string) => ChannelSettings | undefined;
}

/** Who is to talk in a conversation, as a schedule records it. */
export interface ConversationSpeaker {
  conversationId: string;
  /** The identity, or the account it was (links are followed); undefined: the operator, who is listed everywhere and admin of nothing. */
  identity: string | undefined;
  /** A group chat (or a chat that cannot be told from one): it must be listed in `groups`. */
  group: boolean;
}

/** The access rule for identities in conversations, under one configuration. */
export class AccessRules {
  private readonly channelOf: (conversationId: string) => string | undefined;

  constructor(private readonly o: AccessRulesOptions) {
    this.channelOf = channelResolver([...Object.keys(o.access.channels), ...(o.channelIds ?? [])]);
  }

  /**
   * Whether `who` may talk in the conversation now, as a message of theirs
   * would be judged there: an identity through any of its accounts on the
   * conversation's channel (listed, or an admin), or its approval.
   * Throws Redis errors.
   */
  async decide(who: ConversationSpeaker): Promise<AccessDecision> {
    const channelId = this.channelOf(who.conversationId);
    const access = channelId === undefined ? undefined : this.o.access.channels[channelId];
    if (channelId === undefined || !access || access.policy === 'open') return ALLOW;
    const chat: AccessChat = who.group ? { kind: 'group', listed: inListedGroup(access, channelId, who.conversationId) } : { kind: 'direct' };
    if (who.identity === undefined) return decided(accessRuling(access, chat, OPERATOR));
    const identity = await this.o.identities.resolveAccount(who.identity);
    const accounts = new Set(await this.o.identities.accounts(identity));
    const settings = this.o.settingsOf?.(who.conversationId);
    // Ids a client chooses itself (a public web chat) are never listed, as at the gate.
    const verified = settings?.unverifiedSenders !== true;
    const hasOne = (userIds: readonly string[]) => verified && userIds.some((u) => accounts.has(tryAccountId(channelId, u) ?? ''));
    const ruling = accessRuling(access, chat, { admin: hasOne([...access.admins, ...(settings?.admins ?? [])]), listed: hasOne(access.users) });
    if (ruling.kind !== 'approval') return ruling;
    return (await isApproved(this.o.redis, this.o.prefix, identity)) ? ALLOW : refuse('not-paired');
  }
}

// A schedule without a person (made before owners were recorded) is the operator's: no person to check, its chat still is.
const OPERATOR: AccessSpeaker = { admin: false, listed: true };

const decided = (r: AccessRuling): AccessDecision => (r.kind === 'approval' ? refuse('not-paired') : r);
