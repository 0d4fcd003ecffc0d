/**
 * The email channel's implementation: the mailbox watched over IMAP IDLE
 * (`mailbox.ts`, one watching host by a Redis lease, the UID cursor kept in
 * Redis) feeds `inbound.ts`; replies go out over SMTP through `outbound.ts`.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import nodemailer from 'nodemailer';
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, storage } from 'steerbot/plugin';
import { type EmailConfig, type EmailConfigInput, emailConfigSchema } from './config.js';
import { EmailInbound, readCursor } from './inbound.js';
import { cursorKey, EMAIL_PLUGIN_ID, pollLeaseKey } from './keys.js';
import { type Cursor, type ImapSettings, MailboxWatcher, type Round } from './mailbox.js';
import { createEmailOutbound } from './outbound.js';

export type { EmailConfigInput } from './config.js';

function parseConfig(config: EmailConfigInput): EmailConfig {
  return parseSection(emailConfigSchema, config, ['channels', EMAIL_PLUGIN_ID]);
}

function smtpTransport(cfg: EmailConfig) {
  const user = cfg.smtpUser ?? cfg.imapUser ?? cfg.address;
  return nodemailer.createTransport({
    host: cfg.smtpHost,
    port: cfg.smtpPort,
    secure: cfg.smtpSecure,
    requireTLS: !cfg.smtpSecure && cfg.smtpRequireTls,
    ...(cfg.smtpAuth && { auth: { user, pass: cfg.smtpPassword ?? cfg.imapPassword } }),
    connectionTimeout: cfg.timeoutMs,
    greetingTimeout: cfg.timeoutMs,
    socketTimeout: cfg.timeoutMs,
  });
}

/**
 * Creates the email channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createEmailPlugin(config: EmailConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: EMAIL_PLUGIN_ID });
  const secrets = [cfg.imapPassword, ...(cfg.smtpPassword ? [cfg.smtpPassword] : [])];
  const imap: ImapSettings = {
    host: cfg.imapHost,
    port: cfg.imapPort,
    secure: cfg.imapSecure,
    user: cfg.imapUser ?? cfg.address,
    password: cfg.imapPassword,
    mailbox: cfg.mailbox,
    timeoutMs: cfg.timeoutMs,
  };
  const outbound = createEmailOutbound({
    channelId: EMAIL_PLUGIN_ID,
    from: cfg.address,
    ...(cfg.fromName && { fromName: cfg.fromName }),
    transport: smtpTransport(cfg),
    redis: deps.redis,
    prefix: deps.prefix,
    maxFileBytes: cfg.maxFileBytes,
    imap,
    secrets,
  });
  // The inbound side's state, made on start.
  const state: { poll?: storage.LeasedPoll<Cursor | null, Round>; watcher?: MailboxWatcher } = {};
  return {
    id: EMAIL_PLUGIN_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    async start(host: ChannelHost) {
      if (!cfg.requireAuthenticated) logger.warn('email requireAuthenticated is false: any From is believed, and anyone can write any From');
      const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
      const key = cursorKey(host.prefix, imap.host, imap.user, imap.mailbox);
      const watcher = new MailboxWatcher(imap, { maxMessageBytes: cfg.maxMessageBytes, idleRestartMs: cfg.idleRestartMs, logger });
      const inbound = new EmailInbound({
        channelId: EMAIL_PLUGIN_ID,
        self: cfg.address,
        authServId: cfg.requireAuthenticated ? cfg.authServId : undefined,
        maxAttachmentBytes: cfg.maxAttachmentBytes,
        redis: host.redis,
        prefix: host.prefix,
        cursorKey: key,
        logger,
      });
      state.watcher = watcher;
      state.poll = new storage.LeasedPoll<Cursor | null, Round>({
        lease: new storage.RedisLease(host.redis, pollLeaseKey(host.prefix), owner, cfg.pollLeaseMs),
        logger,
        name: 'mailbox',
        leaseName: 'email mailbox',
        standby: 'another host watches the mailbox',
        prepare: () => readCursor(host.redis, key),
        poll: (cursor, signal) => watcher.poll(cursor, signal),
        deliver: (round, _cursor, active) => inbound.handle(host, round, active),
      });
      state.poll.start();
      logger.info({ mailbox: imap.mailbox, owner }, 'email mailbox watch started (one host watches at a time)');
    },
    async stop() {
      await state.poll?.stop();
      await state.watcher?.close();
    },
    ready: () => state.poll?.state() ?? { ready: false, detail: 'not started' },
  };
}
