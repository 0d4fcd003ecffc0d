/**
 * The email channel (a mailbox over IMAP, replies over SMTP): the
 * definition — id, settings, variables, the keys it keeps. The channel
 * itself (and with it imapflow, nodemailer and mailparser) is imported only
 * when an email section is configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { emailConfigSchema } from './config.js';
import { EMAIL_CONVERSATION_KEYS, EMAIL_PLUGIN_ID } from './keys.js';
import { userIdOf } from './normalize.js';

/** The email channel (`channels.email`), on when `EMAIL_IMAP_PASSWORD` is set. */
export default defineChannelPlugin({
  id: EMAIL_PLUGIN_ID,
  kind: 'channel',
  description: 'Email: a mailbox watched with IMAP IDLE in, threaded replies over SMTP out.',
  configSchema: emailConfigSchema,
  storage: { conversationKeys: EMAIL_CONVERSATION_KEYS },
  redact: { paths: ['imapPassword', 'smtpPassword'] },
  // Senders are lower-cased addresses: `Alice@Example.com` in `access` is alice@example.com.
  normalizeUserId: userIdOf,
  env: [
    { env: 'EMAIL_IMAP_PASSWORD', path: 'imapPassword', kind: 'string', secret: true, enables: true },
    { env: 'EMAIL_SMTP_PASSWORD', path: 'smtpPassword', kind: 'string', secret: true },
    { env: 'EMAIL_ADDRESS', path: 'address', kind: 'string' },
    { env: 'EMAIL_IMAP_HOST', path: 'imapHost', kind: 'string' },
    { env: 'EMAIL_SMTP_HOST', path: 'smtpHost', kind: 'string' },
    { env: 'EMAIL_AUTHSERV_ID', path: 'authServId', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createEmailPlugin(config, deps),
});
