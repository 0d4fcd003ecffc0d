/**
 * A parsed mail → normalized inbound message (pure). Update key
 * `email:<Message-ID>` (the same in every copy of a mail); conversation
 * `email:<root Message-ID>`, the thread's first mail: the first of
 * `References`, else `In-Reply-To`, else the mail's own id. A thread is the
 * conversation of the address that started it: anyone else's mail in it (a
 * colleague in Cc, the same person from another address, or someone who
 * copied its ids into `References`) is a conversation of their own,
 * `email:<root>:<sender>` (`inOwnThread`). Ids that are long or carry
 * characters keys cannot hold are hashed. Auto-replies and
 * bounces are skipped (RFC 3834 `Auto-Submitted`, `Precedence`, the
 * vendors' `X-Autoreply`, delivery reports, MAILER-DAEMON), and so is the
 * bot's own mail.
 */
import { createHash } from 'node:crypto';
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';

/** The fields of a mail the channel reads (from mailparser's result). */
export interface MailInput {
  /** Header values by lower-cased name, every occurrence. */
  headers: ReadonlyMap<string, readonly string[]>;
  from: { address: string; name?: string } | undefined;
  messageId?: string;
  inReplyTo?: string;
  references: readonly string[];
  /** The addresses of `To` and `Cc` (groups flattened), lower-cased. */
  recipients: readonly string[];
  subject: string;
  /** The text part, or the HTML part as text. */
  text: string;
}

/** Why a mail is not passed on. */
export type SkipReason = 'no-sender' | 'own' | 'auto-reply' | 'bounce' | 'empty' | 'too-long';

/** What the channel keeps of a thread to reply in it. */
export interface ThreadInfo {
  /** Where replies go, and whose thread it is: the From address, the one whose authentication was checked (`Reply-To` is not: anyone could make the bot write to a third party). */
  to: string;
  subject: string;
  /** The Message-ID (in `<>`) replies answer (`In-Reply-To`). */
  last: string;
  /** `References` of a reply: the mail's own plus its id. */
  refs: string;
}

/** Longest id kept as it is in a key; longer ones are hashed. */
const MAX_ID_CHARS = 96;

/**
 * An id (a Message-ID, an address) usable in update keys and conversation
 * ids: as it is (without `<>`) when short and plain, else `h-<hash>`. Never
 * holds a `:`, so a thread's conversation and a sender's own one under it
 * (`inOwnThread`) cannot be written as each other.
 */
export function idPart(messageId: string): string {
  const bare = messageId.trim().replace(/^<|>$/g, '');
  if (bare.length > 0 && bare.length <= MAX_ID_CHARS && /^[\x21-\x7e]+$/.test(bare) && !/[{}:]/.test(bare)) return bare;
  return `h-${createHash('sha256').update(bare).digest('base64url').slice(0, 32)}`;
}

/** The conversation of a thread root. */
export const conversationIdOf = (channelId: string, root: string): string => `${channelId}:${idPart(root)}`;

/**
 * `message`, moved into a conversation of its sender's own when the thread
 * it names belongs to another address. `owner`: the address the stored
 * thread of `message.conversationId` replies to, undefined when there is
 * none (the sender starts it). The sender's own conversation,
 * `<thread's conversation>:<sender>`, holds only the sender's mail, so they
 * neither read the owner's history nor turn the owner's replies to
 * themselves, and their next mail in the thread finds it again.
 */
export function inOwnThread(message: InboundMessage, owner: string | undefined): InboundMessage {
  const sender = message.sender.id;
  if (owner === undefined || owner.trim().toLowerCase() === sender) return message;
  return { ...message, conversationId: `${message.conversationId}:${idPart(sender)}` };
}

/** The thread's root Message-ID: the first of `References`, else `In-Reply-To`, else the mail's own. */
export function threadRoot(mail: Pick<MailInput, 'references' | 'inReplyTo' | 'messageId'>): string | undefined {
  return mail.references[0] ?? mail.inReplyTo ?? mail.messageId;
}

const first = (mail: MailInput, name: string): string => (mail.headers.get(name)?.[0] ?? '').trim().toLowerCase();

/** Why the mail is an automatic one (an auto-reply or a bounce), or undefined. */
export function automatic(mail: MailInput): 'auto-reply' | 'bounce' | undefined {
  const local = (mail.from?.address ?? '').split('@')[0]!.toLowerCase();
  if (local === 'mailer-daemon' || local === 'postmaster') return 'bounce';
  if (/^multipart\/report\b/.test(first(mail, 'content-type'))) return 'bounce';
  if (first(mail, 'return-path') === '<>') return 'bounce';
  const submitted = first(mail, 'auto-submitted');
  if (submitted !== '' && submitted.split(';')[0]!.trim() !== 'no') return 'auto-reply';
  if (['bulk', 'junk', 'list'].includes(first(mail, 'precedence'))) return 'auto-reply';
  if (mail.headers.has('x-autoreply') || mail.headers.has('x-autorespond')) return 'auto-reply';
  return undefined;
}

/** Lines that start a quote of the mail being answered: everything from them on is history. */
const ON_WROTE = /^On .{1,300}wrote:\s*$/;
const REPLY_MARKERS: Array<RegExp | ((line: string) => boolean)> = [
  ON_WROTE,
  /^-{2,}\s*Original Message\s*-{2,}/i,
  /^-{2,}\s*Forwarded message\s*-{2,}/i,
  /^_{10,}\s*$/,
  /^From: .+/,
  germanReplyMarker,
  /^Le .{1,300}a écrit\s*:\s*$/,
];

/**
 * `Am <date> schrieb <name>:`, as `/^Am .{1,300}schrieb .{0,200}:\s*$/` says, without trying every pair of lengths
 * of its two gaps (thousands of steps on each line a sender writes `schrieb ` into).
 */
function germanReplyMarker(line: string): boolean {
  const s = line.trimEnd();
  if (!s.startsWith('Am ') || !s.endsWith(':') || /[\r\u2028\u2029]/.test(s)) return false;
  // The last `schrieb ` 1 to 300 characters after `Am ` leaves the shortest gap before the `:`: at most 200.
  const at = s.lastIndexOf('schrieb ', 3 + 300);
  return at >= 4 && s.length - 1 - (at + 'schrieb '.length) <= 200;
}

/** The first characters of the markers: a line starting otherwise is tested against none of them. */
const MARKER_STARTS = new Set(['O', '-', '_', 'F', 'A', 'L']);

const isMarker = (line: string) => MARKER_STARTS.has(line[0] ?? '') && REPLY_MARKERS.some((m) => (typeof m === 'function' ? m(line) : m.test(line)));

/**
 * Longest stretch of a mail's text searched for its reply marker, in characters: the largest
 * `dispatch.maxMessageChars`. A person's own text is never longer (it would be refused), and a mail of megabytes
 * is not scanned on the process's one thread.
 */
export const MAX_SEARCHED_CHARS = 1_000_000;

/**
 * The person's own text of a reply: the quoted history below the reply marker, a trailing `>` quote and the
 * signature cut off. Undefined when the text is longer than `MAX_SEARCHED_CHARS` and has no marker in that stretch:
 * the person's own text would be longer than any message is allowed to be.
 */
export function stripQuoted(text: string): string | undefined {
  // Whole lines only: a line cut in two could pass for a marker.
  const searched = text.length <= MAX_SEARCHED_CHARS ? text : text.slice(0, Math.max(0, text.lastIndexOf('\n', MAX_SEARCHED_CHARS)));
  const lines = searched.replace(/\r\n/g, '\n').split('\n');
  let end = -1;
  for (let i = 0; i < lines.length && end < 0; i++) {
    const line = lines[i]!;
    // "On … wrote:" is often wrapped over two lines.
    if (isMarker(line) || (line.startsWith('On ') && i + 1 < lines.length && ON_WROTE.test(`${line} ${lines[i + 1]}`)) || line === '-- ') end = i;
  }
  if (end < 0 && searched !== text) return undefined;
  if (end < 0) end = lines.length;
  while (end > 0 && (lines[end - 1]!.trim() === '' || lines[end - 1]!.startsWith('>'))) end--;
  return lines.slice(0, end).join('\n').trim();
}

/** What `normalizeMail` needs besides the mail. */
export interface NormalizeContext {
  channelId: string;
  /** The bot's address (its own mail is skipped). */
  self: string;
  /** The mail's id when it has no Message-ID: `uid-<validity>.<uid>`. */
  fallbackId: string;
  attachments: Attachment[];
}

/** The user id of a mail address: the address lower-cased (the plugin's `normalizeUserId`, applied to `access` entries too). */
export const userIdOf = (address: string): string => address.toLowerCase();

/**
 * Turns one parsed mail into an inbound message and the thread it continues,
 * or says why it is skipped. The message's conversation is the thread's;
 * `inOwnThread` decides whether it is the sender's.
 */
export function normalizeMail(
  ctx: NormalizeContext,
  mail: MailInput,
): { kind: 'message'; message: InboundMessage; thread: ThreadInfo } | { kind: 'skip'; reason: SkipReason } {
  const from = mail.from && userIdOf(mail.from.address);
  if (!from?.includes('@')) return { kind: 'skip', reason: 'no-sender' };
  if (from === ctx.self.toLowerCase()) return { kind: 'skip', reason: 'own' };
  const auto = automatic(mail);
  if (auto) return { kind: 'skip', reason: auto };
  const text = stripQuoted(mail.text);
  if (text === undefined) return { kind: 'skip', reason: 'too-long' };
  if (text === '' && ctx.attachments.length === 0) return { kind: 'skip', reason: 'empty' };
  const ownId = mail.messageId ?? `<${ctx.fallbackId}@steerbot.invalid>`;
  const root = threadRoot(mail) ?? ownId;
  const message: InboundMessage = {
    conversationId: conversationIdOf(ctx.channelId, root),
    updateKey: `${ctx.channelId}:${idPart(ownId)}`,
    chatId: from,
    sender: { id: from, ...(mail.from?.name && { name: mail.from.name.slice(0, 256) }) },
    text,
    messageId: idPart(ownId),
    ...(mail.subject !== '' && { metadata: { subject: mail.subject.slice(0, 500) } }),
    ...(ctx.attachments.length > 0 && { attachments: ctx.attachments }),
  };
  // RFC 5322 §3.6.4: a reply's References are the parent's References (or In-Reply-To) plus the parent's id; kept to the last 20.
  const refs = [...(mail.references.length > 0 ? mail.references : mail.inReplyTo ? [mail.inReplyTo] : []), ownId];
  const trimmed = refs.length > 20 ? [refs[0]!, ...refs.slice(-19)] : refs;
  const thread: ThreadInfo = { to: from, subject: mail.subject, last: ownId, refs: trimmed.join(' ') };
  return { kind: 'message', message, thread };
}
