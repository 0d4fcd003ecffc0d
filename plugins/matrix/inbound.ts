/**
 * The Matrix channel's inbound side: one `/sync` answer at a time. Invites
 * are joined when `autoJoin` lets their sender in; each joined room's new
 * text and media messages are normalized and handed to the host, in order,
 * and responses to the bot's polls become their answers' commands (`polls.ts`). The
 * first `/sync` of a bot with no stored `since` only learns where "now" is,
 * and a newly joined room's history before the bot's join is skipped: both
 * were written before the bot listened, and are not answered.
 */
import { createHash } from 'node:crypto';
import type { ChannelHost, ChannelOutbound, InboundMessage } from 'steerbot/channel';
import { ChannelApiError, InvalidInputError, type Logger } from 'steerbot/plugin';
import { type MatrixClient, seg } from './client.js';
import type { MatrixConfig } from './config.js';
import { afterOwnJoin, normalizeEvent } from './normalize.js';
import { answerPoll, isPollResponse } from './polls.js';
import { type InvitedRoom, type JoinedRoom, type SyncResponse, timelineEventSchema } from './sync-schema.js';

/** Most rooms whose member count is remembered (the oldest is forgotten first). */
const MEMBER_COUNT_MEMORY = 10_000;

/** Tries of one invite's join that fail for a passing reason (no answer, 5xx, 429) before the sync goes on without it. */
const JOIN_ATTEMPTS = 5;

/** Most rooms whose failed joins are counted at once (the oldest is forgotten past it). */
const JOIN_FAILURE_MEMORY = 1000;

/** Rooms told that encrypted messages are not read, remembered by this process (the txn id dedupes beyond it). */
const ENCRYPTED_NOTICE_MEMORY = 10_000;

/** What an encrypted room is told, once: the bot cannot read end-to-end encrypted messages. */
export const ENCRYPTED_NOTICE =
  'I cannot read end-to-end encrypted messages, so I did not see yours. Please write to me in a room without encryption (or ask the operator to put an encryption proxy in front of me).';

/** What the inbound side needs. */
export interface MatrixInboundOptions {
  channelId: string;
  client: MatrixClient;
  /** The bot's user id. */
  selfId: string;
  autoJoin: MatrixConfig['autoJoin'];
  /** The outbound side's `send`: the host's reply to a refused poll choice goes out with it. */
  send: ChannelOutbound['send'];
  logger: Logger;
}

/** Whether `autoJoin` lets an invite from `inviter` in. */
export function mayJoin(autoJoin: MatrixConfig['autoJoin'], inviter: string | undefined): boolean {
  if (typeof autoJoin === 'boolean') return autoJoin;
  if (inviter === undefined) return false;
  const server = inviter.slice(inviter.indexOf(':'));
  return autoJoin.some((entry) => entry === inviter || (entry.startsWith(':') && entry === server));
}

/** The inbound side of one Matrix channel. */
export class MatrixInbound {
  /** Joined members by room, from `/sync` summaries (sent when they change) or `joined_members`. */
  private readonly memberCounts = new Map<string, number>();
  /** Failed join tries by room, until the join succeeds or is given up: one room's failing server never stalls the others. */
  private readonly joinFailures = new Map<string, number>();
  /** Rooms already told that encrypted messages are not read. */
  private readonly toldEncrypted = new Set<string>();

  constructor(private readonly o: MatrixInboundOptions) {}

  /** Handles one `/sync` answer. `initial`: the first one without a `since` (its timelines are history). Throws only on a transient failure (Redis down, a join the homeserver did not answer). */
  async handle(host: ChannelHost, sync: SyncResponse, initial: boolean): Promise<void> {
    for (const [roomId, room] of Object.entries(sync.rooms?.invite ?? {})) await this.invited(roomId, room);
    for (const [roomId, room] of Object.entries(sync.rooms?.join ?? {})) {
      const count = room.summary?.['m.joined_member_count'];
      if (count !== undefined) this.remember(roomId, count);
      if (initial) continue;
      await this.timeline(host, roomId, room);
    }
  }

  private async invited(roomId: string, room: InvitedRoom): Promise<void> {
    const inviter = inviterOf(room, this.o.selfId);
    if (!mayJoin(this.o.autoJoin, inviter)) {
      this.o.logger.info({ roomId, inviter }, 'matrix invite not joined (autoJoin does not let its sender in)');
      return;
    }
    try {
      await this.o.client.call('join', 'POST', `join/${seg(roomId)}`, { body: {} });
      this.o.logger.info({ roomId, inviter }, 'joined a matrix room on invite');
      this.joinFailures.delete(roomId);
    } catch (err) {
      // No answer, a 5xx or a rate limit: the whole answer is handled again (same `since`), this invite with it, a few times.
      if (!(err instanceof ChannelApiError) || err.status === undefined || err.status >= 500 || err.status === 429) {
        if (this.joinFailed(roomId) < JOIN_ATTEMPTS) throw err;
        this.o.logger.warn({ err, roomId, attempts: JOIN_ATTEMPTS }, 'could not join a matrix room on invite; going on without it (the invite stays)');
        return;
      }
      // Refused (the invite was withdrawn, the room is gone): the invite stays for an operator to look at.
      this.o.logger.warn({ err, roomId }, 'could not join a matrix room on invite');
    }
  }

  /** Counts a failed join of `roomId`; returns the tries so far (the count is forgotten once it reaches the limit). */
  private joinFailed(roomId: string): number {
    const tries = (this.joinFailures.get(roomId) ?? 0) + 1;
    this.joinFailures.delete(roomId);
    if (tries < JOIN_ATTEMPTS) this.joinFailures.set(roomId, tries);
    if (this.joinFailures.size > JOIN_FAILURE_MEMORY) this.joinFailures.delete(this.joinFailures.keys().next().value as string);
    return tries;
  }

  private async timeline(host: ChannelHost, roomId: string, room: JoinedRoom): Promise<void> {
    const events = afterOwnJoin(room.timeline?.events ?? [], this.o.selfId);
    if (events.length === 0) return;
    const group = (await this.memberCount(roomId)) > 2;
    for (const raw of events) {
      const parsed = timelineEventSchema.safeParse(raw);
      if (parsed.success && isPollResponse(parsed.data.type)) {
        await answerPoll({ ...this.o, host }, roomId, group, parsed.data);
        continue;
      }
      const normalized = normalizeEvent({ channelId: this.o.channelId, roomId, selfId: this.o.selfId, group }, raw);
      if (normalized.kind === 'skip') {
        if (normalized.reason === 'encrypted') await this.tellEncrypted(roomId);
        else if (normalized.reason === 'bad-media') this.o.logger.warn({ roomId }, 'matrix media message with a bad mxc:// URI ignored');
        else if (normalized.reason !== 'own' && normalized.reason !== 'not-a-message')
          this.o.logger.debug({ roomId, reason: normalized.reason }, 'matrix event ignored');
        continue;
      }
      await this.receive(host, normalized.message, normalized.event.event_id);
    }
  }

  /** Hands one message to the host. Bad input stays bad on a retry: skipped. Anything else (Redis down) throws, retried with the same `since`. */
  private async receive(host: ChannelHost, message: InboundMessage, eventId: string): Promise<void> {
    try {
      await host.receive(this.o.channelId, message);
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      this.o.logger.warn({ err, eventId }, 'matrix message rejected; skipped');
    }
  }

  /**
   * Tells an encrypted room, once, that its messages are not read: a plain
   * message under a txn id made from the room (the homeserver drops a repeat
   * of it), remembered by this process. A failure is logged, never retried:
   * the next encrypted message tries again.
   */
  private async tellEncrypted(roomId: string): Promise<void> {
    if (this.toldEncrypted.has(roomId)) return;
    const txnId = `e2ee-${createHash('sha256').update(roomId).digest('hex').slice(0, 24)}`;
    try {
      await this.o.client.call('send notice', 'PUT', `rooms/${seg(roomId)}/send/m.room.message/${txnId}`, {
        body: { msgtype: 'm.notice', body: ENCRYPTED_NOTICE },
      });
      this.toldEncrypted.add(roomId);
      if (this.toldEncrypted.size > ENCRYPTED_NOTICE_MEMORY) this.toldEncrypted.delete(this.toldEncrypted.values().next().value as string);
    } catch (err) {
      this.o.logger.warn({ err, roomId }, 'could not tell a matrix room that encrypted messages are not read');
    }
  }

  /** The room's joined members: known from a summary, else asked once. Unknown (the call failed): counted as a group, where commands are for admins. */
  private async memberCount(roomId: string): Promise<number> {
    const known = this.memberCounts.get(roomId);
    if (known !== undefined) return known;
    try {
      const answer = await this.o.client.call('joined members', 'GET', `rooms/${seg(roomId)}/joined_members`);
      const joined = typeof answer.joined === 'object' && answer.joined !== null ? Object.keys(answer.joined).length : 3;
      this.remember(roomId, joined);
      return joined;
    } catch (err) {
      this.o.logger.warn({ err, roomId }, 'could not count the members of a matrix room; taking it for a group');
      return 3;
    }
  }

  private remember(roomId: string, count: number): void {
    this.memberCounts.delete(roomId);
    this.memberCounts.set(roomId, count);
    if (this.memberCounts.size > MEMBER_COUNT_MEMORY) this.memberCounts.delete(this.memberCounts.keys().next().value as string);
  }
}

/**
 * Who invited the bot: the sender of the bot's `m.room.member` invite in
 * the invite's stripped state. That state is the inviting server's say
 * (only the invite itself, which the homeserver appends, is checked), so a
 * server can add a member event naming someone else as the inviter: when
 * the bot's member events there do not all name one sender, nobody is the
 * inviter and the invite is not joined.
 */
function inviterOf(room: InvitedRoom, selfId: string): string | undefined {
  const senders = new Set((room.invite_state?.events ?? []).filter((e) => e.type === 'm.room.member' && e.state_key === selfId).map((e) => e.sender));
  return senders.size === 1 ? [...senders][0] : undefined;
}
