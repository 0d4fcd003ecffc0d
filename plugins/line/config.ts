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
});

/** LINE channel settings after defaults. */
export type LineConfig = z.output<typeof lineConfigSchema>;
/** LINE channel settings as written in a config file (defaults optional). */
export type LineConfigInput = z.input<typeof lineConfigSchema>;
