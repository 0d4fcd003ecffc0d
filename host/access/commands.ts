/**
 * `/pair <code>` (an admin approves a pairing code) and `/link` / `/link <code>`
 * (a person links their accounts across channels). They work on every channel
 * whatever its access policy: `/link <code>` is how a person brings another
 * account of theirs, and an admin may pair from any chat they administer.
 */
import type { ChannelOutbound, ChannelSettings, InboundMessage } from '../../src/channel.js';
import { accountId } from '../../src/identity.js';
import type { AdminCheck } from '../admins.js';
import type { AccessStore, CodeOutcome } from './store.js';

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
  admins: AdminCheck;
  outbound(channelId: string): ChannelOutbound | undefined;
}

/** The reply, and for an approval who to tell (their conversation, on their channel). */
export interface AccessCommandOutcome {
  reply: string;
  /** An approved person's direct conversation to tell they may talk now. */
  notify?: { channel: string; conversationId: string; text: string };
}

/** What an approved person is told. */
export const APPROVED_NOTICE = 'An admin approved you: you can talk to this bot now. Please send your message again.';

const wrong = (o: { kind: 'unknown' } | { kind: 'rate-limited'; retryAfterSeconds: number }, what: string) =>
  o.kind === 'rate-limited' ? `Too many wrong codes; try again in ${Math.ceil(o.retryAfterSeconds / 60)} min.` : `No such ${what} code, or it expired.`;

/** Runs `/pair` or `/link` sent by `message` on `channelId`. Throws Redis errors. */
export async function runAccessCommand(
  deps: AccessCommandDeps,
  name: AccessCommandName,
  args: string,
  channelId: string,
  settings: ChannelSettings,
  message: InboundMessage,
): Promise<AccessCommandOutcome> {
  const account = accountId(channelId, message.sender.id);
  if (name === 'link') return linkCommand(deps.store, account, args);
  // Platform admins count in a group; in a direct chat only the configured admins do (everyone "administers" their own DM).
  const admin = message.group
    ? (await deps.admins.check(deps.outbound(channelId), settings.admins, message.conversationId, message.sender.id)).kind === 'admin'
    : (settings.admins?.includes(message.sender.id) ?? false);
  if (!admin) return { reply: 'Only admins can use /pair.' };
  if (!args) return { reply: 'Usage: /pair <code> — approves the person who got that pairing code.' };
  const r = await deps.store.approve(args, account);
  if (r.kind !== 'ok') return { reply: wrong(r, 'pairing') };
  const { record } = r.value;
  const who = record.name ? `${record.name} (${record.account})` : record.account;
  return {
    reply: `Approved ${who}.`,
    notify: { channel: record.channel, conversationId: record.conversationId, text: APPROVED_NOTICE },
  };
}

async function linkCommand(store: AccessStore, account: string, args: string): Promise<AccessCommandOutcome> {
  const minutes = Math.round(store.limits.codeTtlSeconds / 60);
  if (!args) {
    const code = await store.linkCode(account);
    return { reply: `To link another account of yours to this one, send /link ${code} from it (on any channel) within ${minutes} min.` };
  }
  const r: CodeOutcome<{ kind: 'linked' | 'same'; other: string }> = await store.confirmLink(account, args);
  if (r.kind !== 'ok') return { reply: wrong(r, 'link') };
  if (r.value.kind === 'same') return { reply: 'That code is for this account: send it from your other account.' };
  return { reply: `Linked: this account and ${r.value.other} are now one person to this bot (memory, limits and access follow both).` };
}
