/** Configuration of the LINE channel (`channels.line` in the config file), validated with zod at load. */

import { int } from 'steerbot/plugin';
import { z } from 'zod';

/** Schema of the LINE channel settings. Unknown keys are errors. */
export const lineConfigSchema = z.strictObject({
  channelAccessToken: z
    .string({ error: 'expected the channel access token' })
    .min(16, { error: 'expected the channel access token (a long-lived one, from the Messaging API tab)' })
    .describe("Channel access token of the Messaging API channel (long-lived, from the console's Messaging API tab). Secret: never logged. Required."),
  channelSecret: z
    .string({ error: 'expected the channel secret' })
    .min(16, { error: 'expected the channel secret (from the Basic settings tab)' })
    .describe('Channel secret: every delivery is checked against its `x-line-signature` with it. Secret. Required.'),
  webhookPath: z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
    .default('/line/webhook')
    .describe('Route the webhook is served on (POST). Default `/line/webhook`.'),
  apiBaseURL: z
    .url({ protocol: /^https?$/ })
    .refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })
    .default('https://api.line.me')
    .describe('Messaging API root, without a trailing slash (a local fake in tests). Default `https://api.line.me`.'),
  replyTokenTtlMs: int(0, 60_000)
    .default(50_000)
    .describe(
      'How long after an event its reply token is used, in ms; later (or once used) a reply goes as a push message. LINE lets a token live about a minute. 0: always push. Default 50 000.',
    ),
  rateLimitRetryMs: int(100, 600_000)
    .default(10_000)
    .describe('Wait before a rate-limited call (429) is retried when LINE names no `Retry-After`, in ms. Default 10 000.'),
  loadingSeconds: int(5, 60)
    .refine((s) => s % 5 === 0, { error: 'expected a multiple of 5' })
    .default(20)
    .describe('How long one loading animation (the typing indicator of a one-to-one chat) shows, in seconds (5 to 60, a multiple of 5). Default 20.'),
  filesUrl: z
    .url({ protocol: /^https$/, error: 'expected an https:// URL (LINE fetches media over HTTPS only)' })
    .optional()
    .describe(
      "Where this host's routes are reached from outside over HTTPS (e.g. `https://bot.example.com`). Set: a file the agent sends is kept `fileTtlSeconds` and sent by a signed URL under `/line/files` (an image or audio message, or a link). Default: unset (a file becomes a text message saying it could not be sent).",
    ),
  fileTtlSeconds: int(60, 7 * 86_400)
    .default(86_400)
    .describe('How long a sent file can be fetched from its URL, in seconds (its bytes expire from Redis then). Default 86 400 (a day).'),
  maxFileBytes: int(1024, 50 * 1024 * 1024)
    .default(10 * 1024 * 1024)
    .describe(
      "Largest file kept for LINE to fetch, in bytes; a larger one becomes a text message. Images over 10 MB (LINE's image limit) go as a link. Default 10 485 760 (10 MB).",
    ),
});

/** LINE channel settings after defaults. */
export type LineConfig = z.output<typeof lineConfigSchema>;
/** LINE channel settings as written in a config file (defaults optional). */
export type LineConfigInput = z.input<typeof lineConfigSchema>;
