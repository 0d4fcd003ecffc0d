/**
 * Configuration of one generic webhook channel (`channels.webhooks.<name>`
 * in the config file), validated with zod at load.
 */
import { allowEntry, DEFAULT_DELIVERY_KEY_TTL_SECONDS, enumOf, INPUT_POLICIES, int } from 'steerbot/plugin';
import { z } from 'zod';

const secret = z
  .string({ error: 'expected a secret of at least 16 characters' })
  .min(16, { error: 'expected at least 16 characters' })
  .max(512, { error: 'expected at most 512 characters' });

/** Name of a webhook channel: its channel id is `webhook:<name>`. */
export const WEBHOOK_NAME_RE = /^[a-z0-9][a-z0-9_-]{0,31}$/;

/** Schema of one webhook channel's settings. Unknown keys are errors. */
export const webhookChannelConfigSchema = z.strictObject({
  secret: secret.describe(
    'HMAC-SHA256 key that signs requests (`X-Steerbot-Signature`) and authenticates the event stream. Secret. Required, at least 16 characters.',
  ),
  path: z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*[A-Za-z0-9_.-]$/, { error: 'expected a path like /webhooks/crm' })
    .optional()
    .describe('Route of the channel. Default `/webhooks/<name>`.'),
  callbackUrl: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .optional()
    .describe('Replies are POSTed here, signed like requests. Default: unset (replies are only on the event stream).'),
  callbackSecret: secret.optional().describe('Key that signs callbacks. Secret. Default: `secret`.'),
  policy: enumOf(INPUT_POLICIES)
    .optional()
    .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
    .meta({ deprecated: true }),
  allowedSenders: z
    .array(z.string().min(1))
    .default([])
    .describe('Deprecated: use `access.channels.webhook:<name>.users` (translated at load).')
    .meta({ deprecated: true }),
  admins: z
    .array(z.string().min(1))
    .default([])
    .describe('Deprecated: use `access.channels.webhook:<name>.admins` (translated at load).')
    .meta({ deprecated: true }),
  maxSkewSeconds: int(1, 3600).default(300).describe('Largest accepted clock difference of `X-Steerbot-Timestamp`, in seconds. Default 300.'),
  maxBodyBytes: int(256, 16 * 1024 * 1024)
    .default(262_144)
    .describe('Largest accepted request body, in bytes. Default 262 144 (256 KiB).'),
  maxMessageChars: int(64, 1_000_000).default(16_000).describe('Longest reply message, in characters; longer replies are split. Default 16 000.'),
  callbackMaxAttempts: int(1, 10_000)
    .default(20)
    .describe(
      "Most attempts of one reply's callback before it is given up (logged) and the conversation's next reply is sent. Default 20 (about 8 minutes with the default delays).",
    ),
  callbackRetryBaseMs: int(1, 600_000)
    .default(500)
    .describe('First wait after a failed callback, in ms; doubles per attempt (a `Retry-After` answer wins). Default 500.'),
  callbackMaxDelayMs: int(1, 3_600_000).default(30_000).describe('Longest wait between callback attempts, in ms. Default 30 000.'),
  callbackPollMs: int(10, 60_000)
    .default(100)
    .describe(
      'How often a host looks for conversations with replies to call back when no wake-up came (a stored reply wakes the hosts at once), in ms. Default 100.',
    ),
  callbackTimeoutMs: int(100, 300_000).default(10_000).describe('Timeout of one callback POST, in ms. Default 10 000.'),
  replyStreamMaxLen: int(10, 1_000_000).default(1000).describe('Replies kept per conversation for the event stream (approximate, `MAXLEN ~`). Default 1000.'),
  replyDedupeSeconds: int(60, 30 * 86_400)
    .default(DEFAULT_DELIVERY_KEY_TTL_SECONDS)
    .describe(
      "How long a reply's delivery key is remembered, in seconds: a retried run attempt that sends it again stores nothing. Default 86400, as long as outbox records live.",
    ),
  attachmentHosts: z
    .array(z.string().regex(/^(\*\.)?[a-z0-9.-]+(:\d+)?$/i, { error: 'expected a host name like files.example.com, *.example.com or 127.0.0.1:9000' }))
    .default([])
    .describe(
      'Hosts attachment URLs may be fetched from for the model (`files.example.com`, `*.example.com`, with `:port` when not the default), checked again at every redirect; others stay text placeholders. Default `[]` (none fetched).',
    ),
  attachmentAllowPrivate: z
    .array(allowEntry)
    .default([])
    .describe(
      'Hosts, IP addresses or CIDR ranges attachment URLs may reach although they are not public (loopback, private, link-local and metadata addresses are refused otherwise, even on an `attachmentHosts` host). Default `[]`.',
    ),
  filesUrl: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .optional()
    .describe(
      "Where this host's routes are reached from outside (e.g. `https://bot.example.com`). Set: a file the agent sends is kept `fileTtlSeconds` and its reply carries a signed download URL under the channel's path. Default: unset (a file becomes a text reply saying it could not be sent).",
    ),
  fileTtlSeconds: int(60, 7 * 86_400)
    .default(3600)
    .describe('How long a sent file can be downloaded, in seconds (its bytes expire from Redis then). Default 3600.'),
  maxFileBytes: int(1024, 50 * 1024 * 1024)
    .default(20 * 1024 * 1024)
    .describe('Largest file kept for download, in bytes; a larger one becomes a text reply. Default 20 971 520 (20 MiB).'),
  maxStreamClients: int(1, 10_000).default(100).describe('Most event-stream clients at once (each holds a Redis connection); more get 503. Default 100.'),
});

/** A webhook channel's settings, defaults applied. */
export type WebhookChannelConfig = z.output<typeof webhookChannelConfigSchema>;
/** A webhook channel's settings as written in a config file. */
export type WebhookChannelConfigInput = z.input<typeof webhookChannelConfigSchema>;
