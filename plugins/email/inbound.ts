/**
 * The email channel's inbound side: one round of fetched mail at a time, in
 * UID order. Each mail is parsed (`mailparser`), its sender checked against
 * the receiving server's `Authentication-Results` (`auth-results.ts`), its
 * `To` / `Cc` checked for the bot's address (a signed mail someone received
 * and sends on to the bot unchanged still passes DKIM, but does not name
 * the bot), normalized, its thread stored for the replies (the sender's
 * own when the thread it names is another address's), and handed to the host;
 * the cursor is stored after every mail, so a restart neither answers a
 * mail again nor skips one (a mail handed over twice, the host having died
 * between the two, is dropped by the host's dedupe on its Message-ID).
 */
import { type AddressObject, type EmailAddress, simpleParser } from 'mailparser';
import type { ChannelHost, InboundMessage } from 'steerbot/channel';
import { InvalidInputError, type Logger, type RedisClient, replayWindowSeconds, staleDelivery, storage } from 'steerbot/plugin';
import { attachmentsOf } from './attachments.js';
import { checkRecipient, checkSender } from './auth-results.js';
import { threadKey } from './keys.js';
import type { Cursor, FetchedMail, Round } from './mailbox.js';
import { inOwnThread, type MailInput, normalizeMail, type ThreadInfo } from './normalize.js';

/** What the inbound side needs. */
export interface EmailInboundOptions {
  channelId: string;
  /** The bot's address: a mail must name it in `To` or `Cc`; mail from it is skipped. */
  self: string;
  /** authserv-id whose `Authentication-Results` are believed; undefined: every From is believed. */
  authServId: string | undefined;
  maxAttachmentBytes: number;
  redis: RedisClient;
  prefix: string;
  cursorKey: string;
  logger: Logger;
}

/** Reads the stored cursor; null when there is none. */
export async function readCursor(redis: RedisClient, key: string): Promise<Cursor | null> {
  const h = await storage.redisCall(() => redis.hgetall(key));
  const uid = Number(h.uid);
  return h.validity && Number.isSafeInteger(uid) && uid >= 0 ? { validity: h.validity, uid } : null;
}

/** The addresses of mailparser's `To` or `Cc` (one header or several), groups flattened, lower-cased. */
function addressesOf(field: AddressObject | AddressObject[] | undefined): string[] {
  const flat = (list: EmailAddress[]): string[] => list.flatMap((a) => (a.group ? flat(a.group) : a.address ? [a.address.trim().toLowerCase()] : []));
  return (field === undefined ? [] : Array.isArray(field) ? field : [field]).flatMap((o) => flat(o.value));
}

/** A parsed mail: what `normalizeMail` reads, its `Date`, and the addresses of `To` and of `Cc` apart. */
type ParsedInput = MailInput & { sentAtSeconds: number | undefined; to: string[]; cc: string[] };

/** Turns mailparser's result into what `normalizeMail` reads. */
async function parse(source: Buffer): Promise<ParsedInput> {
  const parsed = await simpleParser(source, { skipTextToHtml: true, skipImageLinks: true });
  const headers = new Map<string, string[]>();
  for (const { key, line } of parsed.headerLines) {
    const value = line
      .slice(line.indexOf(':') + 1)
      .replace(/\r?\n[ \t]+/g, ' ')
      .trim();
    // Appended in place: a mail may carry tens of thousands of headers of one name, and copying the list for each is quadratic.
    const values = headers.get(key.toLowerCase());
    if (values) values.push(value);
    else headers.set(key.toLowerCase(), [value]);
  }
  const from = parsed.from?.value[0];
  const references = parsed.references === undefined ? [] : Array.isArray(parsed.references) ? parsed.references : [parsed.references];
  const inReplyTo = parsed.inReplyTo?.split(/\s+/)[0];
  const to = addressesOf(parsed.to);
  const cc = addressesOf(parsed.cc);
  return {
    headers,
    from: from?.address ? { address: from.address, ...(from.name && { name: from.name }) } : undefined,
    ...(parsed.messageId && { messageId: parsed.messageId }),
    ...(inReplyTo && { inReplyTo }),
    references: references.flatMap((r) => r.split(/\s+/)).filter(Boolean),
    recipients: [...to, ...cc],
    to,
    cc,
    subject: parsed.subject ?? '',
    text: parsed.text ?? '',
    sentAtSeconds: parsed.date && Number.isFinite(parsed.date.getTime()) ? Math.floor(parsed.date.getTime() / 1000) : undefined,
  };
}

/** The inbound side of one mailbox. */
export class EmailInbound {
  constructor(private readonly o: EmailInboundOptions) {}

  /** Hands one round over, storing the cursor after each mail; `active()` false: stop (another host took over). Throws only on a transient failure (Redis down). */
  async handle(host: ChannelHost, round: Round, active: () => boolean): Promise<void> {
    for (const mail of round.mails) {
      if (!active()) return;
      await this.mail(host, round.validity, mail);
      await this.store({ validity: round.validity, uid: mail.uid });
    }
    if (active()) await this.store(round.next);
  }

  private async store(cursor: Cursor): Promise<void> {
    await storage.redisCall(() => this.o.redis.hset(this.o.cursorKey, { validity: cursor.validity, uid: String(cursor.uid) }));
  }

  private async mail(host: ChannelHost, validity: string, fetched: FetchedMail): Promise<void> {
    const { logger } = this.o;
    if (!fetched.source) return;
    let mail: ParsedInput;
    try {
      mail = await parse(fetched.source);
    } catch (err) {
      logger.warn({ err, uid: fetched.uid }, 'email could not be parsed; skipped');
      return;
    }
    if (!this.answerable(host, mail, fetched.uid)) return;
    const { attachments, tooLarge } = attachmentsOf(fetched.structure, { validity, uid: fetched.uid, maxBytes: this.o.maxAttachmentBytes });
    const note = tooLarge.map((name) => `[attachment ${name} not passed on: larger than ${this.o.maxAttachmentBytes} bytes]`).join('\n');
    const withNote = note === '' ? mail : { ...mail, text: `${mail.text}\n\n${note}` };
    const normalized = normalizeMail({ channelId: this.o.channelId, self: this.o.self, fallbackId: `uid-${validity}.${fetched.uid}`, attachments }, withNote);
    if (normalized.kind === 'skip') {
      logger.info({ uid: fetched.uid, reason: normalized.reason }, 'email ignored');
      return;
    }
    await this.handOver(host, normalized.message, normalized.thread, fetched.uid);
  }

  /** Whether a mail may be answered: its From vouched for, the bot named in `To` or `Cc`, its `Date` inside the replay window. Logs why not. */
  private answerable(host: ChannelHost, mail: ParsedInput, uid: number): boolean {
    const { logger } = this.o;
    if (this.o.authServId !== undefined && mail.from) {
      // A DKIM verifier checks the bottommost From, and the From read here is the topmost (RFC 5322 allows one):
      // a From added above a signed one would be believed on the strength of a signature that never covered it.
      const several = (mail.headers.get('from')?.length ?? 0) > 1;
      const verdict = several ? 'several-from' : checkSender(mail.headers.get('authentication-results') ?? [], this.o.authServId, mail.from.address);
      if (verdict !== undefined) {
        logger.warn({ uid, reason: verdict }, 'email sender not authenticated by the receiving server; ignored');
        return false;
      }
    }
    // A signed mail to someone else, sent on to the bot unchanged, names the bot in neither To nor Cc; one sent on
    // with the bot put there must not pass either: only a To or Cc its sender signed counts (`checkRecipient`).
    const self = this.o.self.toLowerCase();
    const named = (['to', 'cc'] as const).filter((header) => mail[header].includes(self));
    if (named.length === 0) {
      logger.warn({ uid }, 'email names the bot in neither To nor Cc (sent on by someone, or a Bcc); ignored');
      return false;
    }
    if (this.o.authServId !== undefined && mail.from && !checkRecipient(mail.headers, this.o.authServId, mail.from.address, named)) {
      logger.warn(
        { uid },
        'email names the bot only in a To or Cc its DKIM signature does not cover, and came from elsewhere than its domain (sent on); ignored',
      );
      return false;
    }
    // A signed mail can be sent again unchanged (DKIM signs no envelope): one older than the dedupe window is not answered.
    const stale = staleDelivery(mail.sentAtSeconds, replayWindowSeconds(host.dedupeTtlSeconds));
    if (stale !== undefined) {
      logger.warn({ uid, reason: stale }, 'email Date older than the dedupe window, or none; ignored');
      return false;
    }
    return true;
  }

  /** Stores the thread a reply is addressed by and hands the message to the host, in the sender's own conversation when the thread it names is another address's. */
  private async handOver(host: ChannelHost, normalized: InboundMessage, thread: ThreadInfo, uid: number): Promise<void> {
    const { redis, prefix } = this.o;
    const named = await storage.redisCall(() => redis.hgetall(threadKey(prefix, normalized.conversationId)));
    const message = inOwnThread(normalized, named.to);
    const key = threadKey(prefix, message.conversationId);
    // Stored before the host sees the mail (the run answering it may reply at once); put back when the host ignores it
    // (a sender the access rules refuse leaves no key behind, and an owner's thread is as it was).
    const previous = message === normalized ? named : await storage.redisCall(() => redis.hgetall(key));
    await storage.redisCall(() => redis.hset(key, { ...thread }));
    const restore = () => storage.redisCall(() => (Object.keys(previous).length === 0 ? redis.del(key) : redis.hset(key, previous)));
    try {
      const result = await host.receive(this.o.channelId, message);
      if (result.kind === 'ignored') await restore();
    } catch (err) {
      await restore();
      // Bad input stays bad on a retry: skipped. Anything else (Redis down) is retried with the same cursor.
      if (!(err instanceof InvalidInputError)) throw err;
      this.o.logger.warn({ err, uid }, 'email rejected; skipped');
    }
  }
}
