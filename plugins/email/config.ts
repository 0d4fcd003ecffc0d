/** Configuration of the email channel (`channels.email` in the config file), validated with zod at load. */

import { int } from 'steerbot/plugin';
import { z } from 'zod';

const MB = 1024 * 1024;
const host = z.string().min(1, { error: 'expected a host name' }).max(255);

/** Schema of the email channel settings. Unknown keys are errors. */
export const emailConfigSchema = z
  .strictObject({
    address: z
      .email({ error: 'expected the email address of the bot mailbox' })
      .describe('Address of the bot mailbox: replies come from it, mail from it is ignored. Required.'),
    fromName: z.string().max(128).optional().describe("Display name of the replies' `From`, e.g. `Support bot`. Default: the address alone."),
    imapHost: host.describe('IMAP server of the mailbox, e.g. `imap.example.org`. Required.'),
    imapPort: int(1, 65_535).default(993).describe('IMAP port. Default 993 (implicit TLS).'),
    imapSecure: z.boolean().default(true).describe('Implicit TLS on connect (port 993); false: STARTTLS when the server offers it. Default true.'),
    imapUser: z.string().min(1).max(256).optional().describe('IMAP login. Default: `address`.'),
    imapPassword: z.string({ error: 'expected the IMAP password' }).min(1).describe('IMAP password (or app password). Secret: never logged. Required.'),
    mailbox: z.string().min(1).max(256).default('INBOX').describe('Mailbox watched with IMAP IDLE. Default `INBOX`.'),
    smtpHost: host.describe('SMTP server replies are submitted to, e.g. `smtp.example.org`. Required.'),
    smtpPort: int(1, 65_535).default(587).describe('SMTP port. Default 587 (submission with STARTTLS).'),
    smtpSecure: z.boolean().default(false).describe('Implicit TLS on connect (port 465); false: STARTTLS. Default false.'),
    smtpRequireTls: z.boolean().default(true).describe('Refuse to submit without STARTTLS when `smtpSecure` is false. Default true.'),
    smtpUser: z
      .string()
      .min(1)
      .max(256)
      .optional()
      .describe('SMTP login. Default: the IMAP login; with `smtpPassword` unset too, no SMTP login when `smtpAuth` is false.'),
    smtpPassword: z.string().min(1).optional().describe('SMTP password. Secret. Default: the IMAP password.'),
    smtpAuth: z.boolean().default(true).describe('Log in to the SMTP server. false: submit without a login (a relay that trusts this host). Default true.'),
    requireAuthenticated: z
      .boolean()
      .default(true)
      .describe(
        "Accept a mail only when the receiving server's `Authentication-Results` (from `authServId`) says dkim=pass or spf=pass for the From domain: a From header is forgeable. false: any From is believed (logged as a warning at start). Default true.",
      ),
    authServId: z
      .string()
      .regex(/^[A-Za-z0-9.-]{1,253}$/, { error: 'expected the authserv-id of the receiving server, e.g. mx.example.org' })
      .optional()
      .describe(
        "authserv-id of the receiving server's `Authentication-Results` header (e.g. `mx.google.com`, your own MX's host name). Required unless `requireAuthenticated` is false.",
      ),
    maxMessageBytes: int(1024, 200 * MB)
      .default(25 * MB)
      .describe('Largest incoming mail read, in bytes; a larger one is skipped (logged). Default 25 MiB.'),
    maxAttachmentBytes: int(0, 100 * MB)
      .default(10 * MB)
      .describe('Largest incoming attachment passed to the agent, in bytes; larger ones are named in the text only. Default 10 MiB.'),
    maxFileBytes: int(1024, 100 * MB)
      .default(15 * MB)
      .describe('Largest file sent as an attachment, in bytes (base64 adds a third: 15 MiB fits the usual 20-25 MB message limits). Default 15 MiB.'),
    idleRestartMs: int(10_000, 29 * 60_000)
      .default(5 * 60_000)
      .describe('Longest wait in IMAP IDLE before the mailbox is looked at anyway, in ms (servers drop IDLE after 30 minutes). Default 300 000.'),
    pollLeaseMs: int(1000, 600_000)
      .default(60_000)
      .describe(
        'Lease of the one host watching the mailbox, in ms (renewed every third of it); a standby host takes over this long after it died. Default 60 000.',
      ),
    timeoutMs: int(1000, 300_000).default(30_000).describe('Timeout of connecting and of one IMAP or SMTP exchange, in ms. Default 30 000.'),
  })
  .refine((c) => !c.requireAuthenticated || c.authServId !== undefined, {
    error: 'set authServId (the receiving server that checks DKIM/SPF), or requireAuthenticated: false to believe any From',
    path: ['authServId'],
  });

/** Email channel settings after defaults. */
export type EmailConfig = z.output<typeof emailConfigSchema>;
/** Email channel settings as written in a config file (defaults optional). */
export type EmailConfigInput = z.input<typeof emailConfigSchema>;
