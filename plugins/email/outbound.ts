/**
 * The email channel's outbound side: replies and files submitted over SMTP
 * (`nodemailer`), in the thread of the conversation: `In-Reply-To` the last
 * mail received, `References` its chain, `Re: ` its subject, to its From
 * address (the authenticated one; `Reply-To` is not followed).
 *
 * SMTP has no idempotency key: a submission whose answer was lost may have
 * been accepted. Each delivery's `Message-ID` is made from its delivery key,
 * so a takeover's resend of a reply whose outcome was never recorded is the
 * same mail, recognisably (many mailboxes drop a second copy of a
 * Message-ID they hold). The window is the time between the server's
 * acceptance and the outbox write.
 *
 * Text goes out as written: Markdown reads well as plain text, and mail
 * clients show `text/plain` as it is. Mail has no practical length limit;
 * `maxMessageChars` keeps one reply readable.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Transporter } from 'nodemailer';
import type { ChannelOutbound, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { type Attachment, InvalidInputError, type RedisClient } from 'steerbot/plugin';
import { fetchEmailAttachment } from './attachments.js';
import { smtpError } from './errors.js';
import { threadKey } from './keys.js';
import type { ImapSettings } from './mailbox.js';
import type { ThreadInfo } from './normalize.js';

/** Longest reply in one mail, in characters (mail itself has no practical limit). */
export const EMAIL_MAX_MESSAGE_CHARS = 100_000;

/** Options of `createEmailOutbound`. */
export interface EmailOutboundOptions {
  channelId: string;
  /** The bot's address, and its display name. */
  from: string;
  fromName?: string;
  transport: Transporter;
  redis: RedisClient;
  prefix: string;
  /** Largest file sent, in bytes. */
  maxFileBytes: number;
  imap: ImapSettings;
  /** Removed from error messages. */
  secrets: readonly string[];
}

/** The Message-ID of a delivery: made from `deliveryKey`, so a resend is the same mail; random without one. */
export function messageIdOf(deliveryKey: string | undefined, from: string): string {
  const domain = from.slice(from.lastIndexOf('@') + 1);
  const local = deliveryKey === undefined ? randomUUID() : createHash('sha256').update(deliveryKey).digest('base64url').slice(0, 32);
  return `<sb.${local}@${domain}>`;
}

/** `Re: ` before a subject that does not start with one. */
export const replySubject = (subject: string): string => (/^re:/i.test(subject.trim()) ? subject.trim() : `Re: ${subject.trim()}`.trim());

/** Builds the outbound side. Every method throws ChannelApiError (an EmailApiError: SMTP 4xx status 503, retried; 5xx status 422). */
export function createEmailOutbound(o: EmailOutboundOptions): ChannelOutbound {
  /** The thread a mail `messageId` answers: its last mail, or, for a resend of the last one, the mail before it. */
  async function threadOf(conversationId: string, messageId: string): Promise<ThreadInfo> {
    if (!conversationId.startsWith(`${o.channelId}:`)) throw new InvalidInputError(`not a ${o.channelId} conversation: ${conversationId}`);
    const t = await o.redis.hgetall(threadKey(o.prefix, conversationId));
    if (!t.to || !t.last) throw new InvalidInputError('no email thread for this conversation: the bot only replies to mail it received');
    if (t.last === messageId && t.prev) return { to: t.to, subject: t.subject ?? '', last: t.prev, refs: t.prevRefs ?? t.prev };
    return { to: t.to, subject: t.subject ?? '', last: t.last, refs: t.refs ?? t.last };
  }

  /**
   * After a mail went out: the next one answers it, so the parts of a long
   * answer are a chain mail clients show in order. The parent is kept for a
   * resend of the same mail (after a takeover), which must not answer itself.
   */
  async function advance(conversationId: string, thread: ThreadInfo, messageId: string): Promise<void> {
    const refs = `${thread.refs} ${messageId}`.trim().split(/\s+/);
    const trimmed = refs.length > 20 ? [refs[0]!, ...refs.slice(-19)] : refs;
    await o.redis.hset(threadKey(o.prefix, conversationId), { last: messageId, refs: trimmed.join(' '), prev: thread.last, prevRefs: thread.refs });
  }

  async function submit(
    conversationId: string,
    text: string,
    deliveryKey: string | undefined,
    attachments: OutboundFile[] = [],
  ): Promise<{ messageId: string }> {
    const messageId = messageIdOf(deliveryKey, o.from);
    const thread = await threadOf(conversationId, messageId);
    try {
      await o.transport.sendMail({
        from: o.fromName ? { name: o.fromName, address: o.from } : o.from,
        to: thread.to,
        subject: replySubject(thread.subject || 'your message'),
        text,
        messageId,
        inReplyTo: thread.last,
        references: thread.refs,
        // RFC 3834: an automatic answer; other responders do not answer it back.
        headers: { 'Auto-Submitted': 'auto-replied' },
        attachments: attachments.map((f) => ({ filename: f.name, content: Buffer.from(f.bytes), contentType: f.mimeType })),
      });
    } catch (err) {
      throw smtpError(err, o.secrets);
    }
    await advance(conversationId, thread, messageId);
    return { messageId };
  }

  return {
    channelId: o.channelId,
    maxMessageChars: EMAIL_MAX_MESSAGE_CHARS,
    maxFileBytes: o.maxFileBytes,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      if (text.length > EMAIL_MAX_MESSAGE_CHARS) throw new InvalidInputError(`an email reply holds at most ${EMAIL_MAX_MESSAGE_CHARS} characters here`);
      return submit(conversationId, text, opts.deliveryKey);
    },

    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) {
      if (file.bytes.byteLength > o.maxFileBytes) throw new InvalidInputError(`file is ${file.bytes.byteLength} bytes, more than ${o.maxFileBytes}`);
      return submit(conversationId, file.caption ?? `Attached: ${file.name}`, opts.deliveryKey, [file]);
    },

    fetchAttachment: (attachment: Attachment, { maxBytes }) => fetchEmailAttachment(o.imap, attachment, maxBytes),
  };
}
