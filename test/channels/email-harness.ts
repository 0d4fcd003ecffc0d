/**
 * The email channel wired end to end on a RunnerHarness, against the real
 * local mail servers (testing/fakes/mail-servers.ts): the real plugin
 * watching the bot's INBOX over IMAP, the real channel host enqueueing runs,
 * a runner delivering over SMTP. Alice writes over SMTP (or her mail is
 * put into the bot's INBOX with IMAP APPEND, as a server delivers a copy)
 * and reads the replies from her own INBOX.
 */
import { ImapFlow } from 'imapflow';
import { type ParsedMail, simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import { createEmailPlugin, type EmailConfigInput } from '../../plugins/email/channel.js';
import { cursorKey } from '../../plugins/email/keys.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { MailServers, MailUser } from '../../testing/fakes/mail-servers.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { hostChannel, runnerFor } from './system.js';

/** The authserv-id the tests' receiving server stamps its `Authentication-Results` with. */
export const AUTHSERV = 'mx.example.test';

/** The plugin settings for `servers`. */
export function emailConfig(servers: MailServers, over: Partial<EmailConfigInput> = {}): EmailConfigInput {
  return {
    address: servers.bot.address,
    imapHost: servers.host,
    imapPort: servers.imapPort,
    imapSecure: false,
    imapUser: servers.bot.user,
    imapPassword: servers.bot.pass,
    smtpHost: servers.host,
    smtpPort: servers.smtpPort,
    smtpRequireTls: false,
    smtpAuth: false,
    authServId: AUTHSERV,
    ...over,
  };
}

/** An email plugin on the harness's Redis. */
export function emailPlugin(h: RunnerHarness, servers: MailServers, config: Partial<EmailConfigInput> = {}): ChannelPlugin {
  return createEmailPlugin(emailConfig(servers, config), { logger: h.ctx.logger, redis: h.ctx.redis, prefix: h.prefix });
}

/** Starts `plugin` with a channel host on the harness (no runner), and waits until it watches the mailbox. */
export async function startEmailHost(h: RunnerHarness, servers: MailServers, plugin: ChannelPlugin): Promise<HttpServer> {
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  await hostChannel(h, http, plugin);
  // Mail that arrives before the first cursor is stored is history to the bot.
  const key = cursorKey(h.prefix, servers.host, servers.bot.user, 'INBOX');
  await waitFor(async () => (await redis.exists(key)) === 1, 10_000, 'the mailbox cursor');
  return http;
}

/** The plugin, its host and a runner answering with `agent`. */
export async function startEmailSystem(o: { h: RunnerHarness; servers: MailServers; agent: RunnerPlugin; config?: Partial<EmailConfigInput> }) {
  const plugin = emailPlugin(o.h, o.servers, o.config);
  const http = await startEmailHost(o.h, o.servers, plugin);
  await runnerFor(o.h, o.agent, plugin);
  return { http, plugin };
}

let n = 0;
/** A fresh Message-ID at example.test. */
export const newMessageId = (): string => `<t${Date.now().toString(36)}.${++n}.${process.pid}@example.test>`;

/** The `Authentication-Results` header the tests' receiving server adds for a mail from `from` whose DKIM and SPF passed. */
export const passedAuth = (from: string, authServId = AUTHSERV): string =>
  `${authServId}; dkim=pass header.d=${from.split('@')[1]} header.s=s1; spf=pass smtp.mailfrom=${from}`;

/** What `mailToBot` sends. */
export interface TestMail {
  subject?: string;
  text: string;
  messageId?: string;
  inReplyTo?: string;
  references?: string[];
  /** Extra headers (a list: one header per value); default: a passing `Authentication-Results` for alice. */
  headers?: Record<string, string | string[]>;
  from?: string;
  /** The `To` header. Default: the bot (the envelope names the bot either way). */
  to?: string;
  cc?: string;
  /** An `Authentication-Results` header put above every header the sender wrote, as the receiving server adds its own. */
  receivedAuth?: string;
  replyTo?: string;
  /** The `Date` header. Default: now. */
  date?: Date;
  attachments?: { filename: string; content: Buffer; contentType: string }[];
}

/** The raw mail of `m` from alice to the bot (RFC 5322), and its Message-ID. */
export async function rawMail(servers: MailServers, m: TestMail): Promise<{ raw: Buffer; messageId: string }> {
  const messageId = m.messageId ?? newMessageId();
  const from = m.from ?? servers.alice.address;
  const build = nodemailer.createTransport({ streamTransport: true, buffer: true });
  const info = await build.sendMail({
    from,
    to: m.to ?? servers.bot.address,
    ...(m.cc && { cc: m.cc }),
    subject: m.subject ?? 'A question',
    text: m.text,
    messageId,
    ...(m.inReplyTo && { inReplyTo: m.inReplyTo }),
    ...(m.references && { references: m.references }),
    headers: m.headers ?? { 'Authentication-Results': passedAuth(from) },
    ...(m.attachments && { attachments: m.attachments }),
    ...(m.date && { date: m.date }),
    ...(m.replyTo && { replyTo: m.replyTo }),
  });
  const raw = info.message as Buffer;
  return { raw: m.receivedAuth ? Buffer.concat([Buffer.from(`Authentication-Results: ${m.receivedAuth}\r\n`), raw]) : raw, messageId };
}

/** Sends `m` from alice to the bot over SMTP; returns its Message-ID. */
export async function mailToBot(servers: MailServers, m: TestMail): Promise<string> {
  const { raw, messageId } = await rawMail(servers, m);
  const smtp = nodemailer.createTransport({ host: servers.host, port: servers.smtpPort, secure: false, ignoreTLS: true });
  await smtp.sendMail({ envelope: { from: m.from ?? servers.alice.address, to: servers.bot.address }, raw });
  smtp.close();
  return messageId;
}

/** Puts a raw mail into `user`'s INBOX with IMAP APPEND (a copy delivered once more). */
export async function appendTo(servers: MailServers, user: MailUser, raw: Buffer): Promise<void> {
  const client = new ImapFlow({ host: servers.host, port: servers.imapPort, secure: false, auth: { user: user.user, pass: user.pass }, logger: false });
  await client.connect();
  try {
    await client.append('INBOX', raw);
  } finally {
    await client.logout();
  }
}

/** Every mail in `user`'s INBOX, parsed, in order. */
export async function mailsOf(servers: MailServers, user: MailUser): Promise<ParsedMail[]> {
  const client = new ImapFlow({ host: servers.host, port: servers.imapPort, secure: false, auth: { user: user.user, pass: user.pass }, logger: false });
  await client.connect();
  try {
    const box = await client.mailboxOpen('INBOX', { readOnly: true });
    if (box.exists === 0) return [];
    const mails = await client.fetchAll('1:*', { uid: true, source: true });
    return Promise.all(mails.map((m) => simpleParser(m.source!)));
  } finally {
    await client.logout();
  }
}

/** The bot's replies in alice's INBOX in the thread whose root is `root`. */
export async function repliesIn(servers: MailServers, root: string): Promise<ParsedMail[]> {
  const refs = (m: ParsedMail) => (m.references === undefined ? [] : Array.isArray(m.references) ? m.references : [m.references]);
  return (await mailsOf(servers, servers.alice)).filter((m) => m.from?.value[0]?.address === servers.bot.address && refs(m).includes(root));
}

/** Waits until the thread of `root` holds at least `count` replies; returns them. */
export async function untilReplies(servers: MailServers, root: string, count: number, what = 'the reply'): Promise<ParsedMail[]> {
  return waitFor(
    async () => {
      const got = await repliesIn(servers, root);
      return got.length >= count && got;
    },
    20_000,
    what,
    100,
  );
}
