/**
 * The access check at ingest: a message on a channel whose policy is
 * `allowlist` or `pairing` reaches the record only from a listed user, an
 * approved identity (pairing) or a configured admin; in groups, only in a
 * listed group (and, with `members`, from an allowed member). The rule is the
 * core's (`accessRuling`, src/people/access-rule.ts), which schedule fires
 * ask too; this gate adds what a message gets: anything refused is refused
 * before the record write, answered at most once per user per notice window
 * (or with a pairing code), noted for the console, never recorded in the conversation.
 */
import type { Logger } from 'pino';
import type { ChannelSettings, InboundMessage } from '../../src/channel.js';
import type { AccessConfig, ChannelAccess } from '../../src/config/schema.js';
import { type AccessChat, type AccessRuling, accessRuling, inListedGroup, type RefusalReason } from '../../src/people/access-rule.js';
import { tryAccountId } from '../../src/people/identity.js';
import { metrics } from '../../src/telemetry/metrics.js';
import type { AccessStore } from './store.js';

/** The gate's verdict: `refuse` carries the answer to send, or none when the user was answered within the window. */
export type AccessVerdict = { kind: 'allow' } | { kind: 'refuse'; reason: RefusalReason; notice: string | undefined };

const ALLOW: AccessVerdict = { kind: 'allow' };

/** What the refusals say. */
export const ACCESS_NOTICES = {
  notAllowed: 'This bot does not answer you here.',
  groupNotAllowed: 'This bot is not enabled in this chat.',
  memberNotPaired: 'This bot only answers people an admin approved. Send it a direct message to get a pairing code.',
  full: 'Too many people are waiting for approval right now; try again later.',
  code: (code: string, minutes: number) =>
    `This bot only answers people an admin approved. Your pairing code is ${code} (valid ${minutes} min): ask an admin to send /pair ${code}. Your messages are not kept until then.`,
  // The code is not kept (only its hash), so the reminder cannot repeat it; the code sent earlier stays valid.
  pending: (minutes: number) =>
    `Your pairing code, sent earlier, is still waiting for an admin's approval; it expires in ${minutes} min, and after that a message to me gets you a new one. Your messages are not kept until then.`,
} as const;

/** Applies the `access` config section. */
export class AccessGate {
  constructor(
    readonly config: AccessConfig,
    readonly store: AccessStore,
    private readonly logger: Logger,
  ) {}

  /** The channel's access settings (default `open`). */
  channel(channelId: string): ChannelAccess | undefined {
    return this.config.channels[channelId];
  }

  /** Decides on one message; writes only the refusal note and notice window. Throws Redis errors. */
  async check(channelId: string, settings: ChannelSettings, message: InboundMessage): Promise<AccessVerdict> {
    const access = this.channel(channelId);
    const userId = message.sender.id;
    // A sender id that cannot name an account (whitespace, braces) cannot be listed or approved either.
    const account = tryAccountId(channelId, userId);
    // Sender ids a client chooses itself (a public web chat) cannot be listed: anyone could claim one.
    const verified = !settings.unverifiedSenders;
    // Listed by the rule a schedule's fire asks too: the chat, or a topic or thread of it (`:`, `/`, `;`).
    const chat: AccessChat = message.group
      ? { kind: 'group', listed: access !== undefined && inListedGroup(access, channelId, message.conversationId) }
      : { kind: 'direct' };
    const ruling = accessRuling(access, chat, {
      admin: verified && (settings.admins?.includes(userId) ?? false),
      listed: verified && account !== undefined && (access?.users.includes(userId) ?? false),
    });
    if (ruling.kind === 'allow') return ALLOW;
    const verdict: AccessVerdict = account
      ? await this.verdict(channelId, account, ruling, message)
      : { kind: 'refuse', reason: 'not-allowed', notice: undefined };
    if (verdict.kind === 'refuse') {
      this.logger.info({ channelId, reason: verdict.reason, answered: verdict.notice !== undefined }, 'message refused by the access policy');
      metrics.accessRefused.inc({ channel: channelId, reason: verdict.reason });
      await this.store.noteRefusal({ channel: channelId, chatId: message.chatId, userId, reason: verdict.reason });
    }
    return verdict;
  }

  /** The verdict of a ruling that did not allow outright: the refusal's notice, or the approval read (and a pairing code). */
  private async verdict(channelId: string, account: string, ruling: Exclude<AccessRuling, { kind: 'allow' }>, message: InboundMessage): Promise<AccessVerdict> {
    if (ruling.kind === 'refuse')
      return this.refuse(account, ruling.reason, ruling.reason === 'group-not-allowed' ? ACCESS_NOTICES.groupNotAllowed : ACCESS_NOTICES.notAllowed);
    if ((await this.store.approved(channelId, message.sender.id)).approved) return ALLOW;
    // Codes are given only in direct chats: anyone can add the bot to a group.
    if (message.group) return this.refuse(account, 'not-paired', ACCESS_NOTICES.memberNotPaired);
    const r = await this.store.requestCode({
      account,
      channel: channelId,
      userId: message.sender.id,
      ...(message.sender.name && { name: message.sender.name.slice(0, 64) }),
      conversationId: message.conversationId,
    });
    const minutes = Math.round(this.store.limits.codeTtlSeconds / 60);
    const notice =
      r.kind === 'code'
        ? ACCESS_NOTICES.code(r.code, minutes)
        : r.kind === 'pending'
          ? ACCESS_NOTICES.pending(Math.max(1, Math.ceil(r.expiresInSeconds / 60)))
          : r.kind === 'full'
            ? ACCESS_NOTICES.full
            : undefined;
    return { kind: 'refuse', reason: 'not-paired', notice };
  }

  /**
   * Whether the sender may talk here now, without writing anything (no code,
   * no notice): the channel is open, or they are an admin, listed, or approved.
   */
  async mayTalk(channelId: string, settings: ChannelSettings, message: InboundMessage): Promise<boolean> {
    const access = this.channel(channelId);
    if (!access || access.policy === 'open') return true;
    return this.standing(channelId, settings, message.sender.id);
  }

  /**
   * Whether an account has access it was given, not merely an open door: a
   * configured admin or listed user of its channel, or an approved identity.
   * Linking never hands such an account to an identity without it.
   */
  async standing(channelId: string, settings: ChannelSettings, userId: string): Promise<boolean> {
    if (settings.unverifiedSenders) return false;
    if (settings.admins?.includes(userId) || this.channel(channelId)?.users.includes(userId)) return true;
    return tryAccountId(channelId, userId) !== undefined && (await this.store.approved(channelId, userId)).approved;
  }

  private async refuse(account: string, reason: RefusalReason, text: string): Promise<AccessVerdict> {
    return { kind: 'refuse', reason, notice: (await this.store.firstNotice(account)) ? text : undefined };
  }
}
