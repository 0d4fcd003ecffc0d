/**
 * `/pair <code>` (an admin approves a pairing code) and `/link` / `/link <code>`
 * (a person links their accounts across channels). They run before the access
 * policy, on every channel whatever its policy: `/link <code>` is how a
 * person brings another account of theirs.
 *
 * Acts that widen who may talk need someone the operator chose: `/pair` is
 * for the channel's configured `admins` only (in any chat), never for
 * whoever a platform calls an admin of the group it was sent in, since
 * anyone can create a group, add the bot and be its admin. Link codes are
 * shown only in a direct chat and bound to the account that asked, so an
 * identity (with its approval, memory and budget) is joined only by someone
 * its owner gave a code to.
 *
 * This runs before ingest, so the per-sender rate limits never see these
 * commands: every answer a stranger can make the bot give again and again
 * (a refusal, `/link` in a group, a wrong code) goes through a notice window.
 */
import type { ChannelSettings, InboundMessage } from '../../src/channel.js';
import { accountId } from '../../src/people/identity.js';
import type { AccessGate } from './gate.js';
import type { AccessStore, CodeOutcome, LinkOutcome } from './store.js';

/** Names of the access commands, without the slash. */
export type AccessCommandName = 'pair' | 'link';

// `/name`, an optional `@BotName` suffix (Telegram groups), then arguments.
const ACCESS_COMMAND_RE = /^\/(pair|link)(?:@[A-Za-z0-9_]+)?(?:\s+([\s\S]*))?$/i;

/** The access command in `text`, or undefined. */
export function parseAccessCommand(text: string): { name: AccessCommandName; args: string } | undefined {
  const m = ACCESS_COMMAND_RE.exec(text.trim());
  if (!m) return undefined;
  return { name: m[1]!.toLowerCase() as AccessCommandName, args: (m[2] ?? '').trim().slice(0, 64) };
}

/** What running an access command needs. */
export interface AccessCommandDeps {
  store: AccessStore;
  /** Whether the sender may talk on this channel now (`AccessGate.mayTalk`), and has access they were given (`AccessGate.standing`). */
  gate: Pick<AccessGate, 'mayTalk' | 'standing'>;
}

/** The reply, and for an approval who to tell (their conversation, on their channel). */
export interface AccessCommandOutcome {
  reply: string;
  /** An approved person's direct conversation to tell they may talk now. */
  notify?: { channel: string; conversationId: string; text: string };
}

/** What an approved person is told. */
export const APPROVED_NOTICE = 'An admin approved you: you can talk to this bot now. Please send your message again.';

/** What the access commands answer besides approvals and links. */
export const ACCESS_COMMAND_REPLIES = {
  pairNotAdmin: "Only this bot's admins can use /pair.",
  pairUsage: 'Usage: /pair <code> — approves the person who got that pairing code.',
  linkInDm: 'Send /link to me in a direct message: link codes are only shown there.',
  linkBurned:
    'That code was posted where others can see it, so it no longer works. Send /link to me in a direct message for a new one, and send it from your other account in a direct message too.',
  linkOwn: 'That code is for this account: send it from your other account.',
  linkSame: 'These accounts are already one person to this bot.',
  linkNotAllowed: 'Only people this bot answers can make link codes. To bring this account in, send /link from an account it answers and send the code here.',
  pairElsewhere: (channel: string) => `That code was given on ${channel}: one of its admins approves it there, or the operator in the console.`,
  unverified: 'This chat cannot approve or link accounts: its visitors are not known to a platform.',
  linkRefused:
    'This account has access to this bot and the one that made that code does not, so they were not linked (the code is used up). To bring your other account in, send /link here and send the code you get from the other account.',
} as const;

const wrong = (o: { kind: 'unknown' } | { kind: 'rate-limited'; retryAfterSeconds: number }, what: string) =>
  o.kind === 'rate-limited' ? `Too many wrong codes; try again in ${Math.ceil(o.retryAfterSeconds / 60)} min.` : `No such ${what} code, or it expired.`;

/**
 * Kinds of answer with notice windows of their own, so that one does not
 * silence the next a person needs (told they cannot make a link code, they
 * are still told once that the code they then send is wrong).
 */
type NoticeTopic = 'refused' | 'link-in-group' | 'wrong-code' | 'guess-limit';

/** Answers an account at most once per notice window and `topic`; later answers in the window are empty. */
type Once = (reply: string, topic: NoticeTopic) => Promise<AccessCommandOutcome>;

/**
 * Runs `/pair` or `/link` sent by `message` on `channelId`. What a stranger
 * can make the bot answer at will (a refusal, `/link` in a group, a wrong link
 * code, the guess limit) is answered at most once per notice window and kind
 * of answer (empty `reply` otherwise), so a stranger cannot make the bot talk
 * on and on. Throws Redis errors.
 */
export async function runAccessCommand(
  deps: AccessCommandDeps,
  name: AccessCommandName,
  args: string,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
): Promise<AccessCommandOutcome> {
  const account = accountId(channelId, message.sender.id);
  // Windows of their own, apart from the refusal notice: a stranger who got a pairing code is still told once why /pair did nothing.
  const once: Once = async (reply, topic) => ({ reply: (await deps.store.firstNotice(`command:${topic}:${account}`)) ? reply : '' });
  if (settings.unverifiedSenders) return once(ACCESS_COMMAND_REPLIES.unverified, 'refused');
  if (name === 'link') {
    if (message.group) return linkInGroup(deps.store, args, once);
    // Making a code is for people this bot answers; confirming one is how a new account joins them.
    if (!args && !(await deps.gate.mayTalk(channelId, settings, message))) return once(ACCESS_COMMAND_REPLIES.linkNotAllowed, 'refused');
    return linkCommand(deps.store, account, args, await deps.gate.standing(channelId, settings, message.sender.id), once);
  }
  if (!settings.admins?.includes(message.sender.id)) return once(ACCESS_COMMAND_REPLIES.pairNotAdmin, 'refused');
  if (!args) return { reply: ACCESS_COMMAND_REPLIES.pairUsage };
  const r = await deps.store.approve(args, account, channelId);
  if (r.kind !== 'ok') return { reply: wrong(r, 'pairing') };
  if (r.value.kind === 'elsewhere') return { reply: ACCESS_COMMAND_REPLIES.pairElsewhere(r.value.channel) };
  const { record } = r.value;
  const who = record.name ? `${record.name} (${record.account})` : record.account;
  return {
    reply: `Approved ${who}.`,
    notify: { channel: record.channel, conversationId: record.conversationId, text: APPROVED_NOTICE },
  };
}

/**
 * In a group everyone reads the chat: no code is shown there, and one posted
 * there is revoked (and said so: only a real code does that). Anyone can add
 * the bot to a group of their own, so the pointer to a direct chat is `once`.
 */
async function linkInGroup(store: AccessStore, args: string, once: Once): Promise<AccessCommandOutcome> {
  if (args && (await store.revokeLinkCode(args))) return { reply: ACCESS_COMMAND_REPLIES.linkBurned };
  return once(ACCESS_COMMAND_REPLIES.linkInDm, 'link-in-group');
}

/** `/link` (a new code) or `/link <code>` in a direct chat; a wrong code and the guess limit are each answered `once`. */
async function linkCommand(store: AccessStore, account: string, args: string, standing: boolean, once: Once): Promise<AccessCommandOutcome> {
  const minutes = Math.round(store.limits.codeTtlSeconds / 60);
  if (!args) {
    const code = await store.linkCode(account, standing);
    return {
      reply: `To link another account of yours to this one, send /link ${code} from it (on any channel, in a direct message) within ${minutes} min. The code works once; keep it to yourself.`,
    };
  }
  const r: CodeOutcome<LinkOutcome> = await store.confirmLink(account, args, standing);
  if (r.kind !== 'ok') return once(wrong(r, 'link'), r.kind === 'rate-limited' ? 'guess-limit' : 'wrong-code');
  switch (r.value.kind) {
    case 'own':
      return { reply: ACCESS_COMMAND_REPLIES.linkOwn };
    case 'same':
      return { reply: ACCESS_COMMAND_REPLIES.linkSame };
    case 'refused':
      return { reply: ACCESS_COMMAND_REPLIES.linkRefused };
    case 'linked':
      return { reply: `Linked: this account and ${r.value.other} are now one person to this bot (memory, limits and access follow both).` };
  }
}
