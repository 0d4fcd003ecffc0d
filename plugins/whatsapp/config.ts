/** Configuration of the WhatsApp channel (`channels.whatsapp` in the config file), validated with zod at load. */

import { enumOf, INPUT_POLICIES, int, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

/** WhatsApp ids (`wa_id`): the phone number in international format, digits only. */
const waIdList = z
  .array(z.union([z.string().regex(/^\d{5,20}$/, { error: 'expected a WhatsApp id (the phone number, digits only)' }), z.number().int()]))
  .transform((ids) => ids.map(String))
  .default([]);

/** Schema of the WhatsApp channel settings. Unknown keys are errors. */
export const whatsappConfigSchema = z.strictObject({
  accessToken: z
    .string({ error: 'expected the access token' })
    .min(16, { error: 'expected the access token (a system user token)' })
    .describe('Access token of the WhatsApp Business app (a system user token with `whatsapp_business_messaging`). Secret: never logged. Required.'),
  phoneNumberId: z
    .string({ error: 'expected the phone number id' })
    .regex(/^\d{1,30}$/, { error: 'expected the phone number id (digits, from the app dashboard)' })
    .describe('Id of the business phone number the bot answers from (not the number itself). Messages to other numbers of the app are ignored. Required.'),
  appSecret: z
    .string({ error: 'expected the app secret' })
    .min(16, { error: 'expected the app secret' })
    .describe('App secret: every delivery is checked against its `X-Hub-Signature-256` with it. Secret. Required.'),
  verifyToken: z
    .string({ error: 'expected the verify token' })
    .min(8, { error: 'expected at least 8 characters' })
    .max(256, { error: 'expected at most 256 characters' })
    .describe('Token you type into the webhook settings; `GET <webhookPath>` answers the challenge only when it matches. Secret. Required.'),
  webhookPath: z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
    .default('/whatsapp/webhook')
    .describe('Route the webhook is served on (GET: verification, POST: deliveries). Default `/whatsapp/webhook`.'),
  graphApiUrl: z
    .url({ protocol: /^https?$/ })
    .refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })
    .default('https://graph.facebook.com')
    .describe('Graph API root, without a trailing slash (a local fake in tests). Default `https://graph.facebook.com`.'),
  graphApiVersion: z
    .string()
    .regex(/^v\d{1,3}\.\d{1,2}$/, { error: 'expected a version like v23.0' })
    .default('v23.0')
    .describe('Graph API version of every call. Default `v23.0`.'),
  policy: enumOf(INPUT_POLICIES)
    .optional()
    .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
    .meta({ deprecated: true }),
  allowedUsers: waIdList.describe('Deprecated: use `access.channels.whatsapp.users` (translated at load).').meta({ deprecated: true }),
  rateLimitRetryMs: int(100, 600_000)
    .default(10_000)
    .describe('Wait before a rate-limited call is retried when the Graph API names no `Retry-After`, in ms. Default 10 000.'),
  typingRefreshMs: int(1000, 25_000)
    .default(20_000)
    .describe('Least time between two read receipts with the typing indicator in one conversation, in ms (WhatsApp shows it up to 25 s). Default 20 000.'),
  timeoutMs: int(1000, 120_000).default(15_000).describe('Timeout of one Graph API call, in ms. Default 15 000.'),
  reactions: reactionsSetting({ taken: '👀', answered: '✅', failed: '❌' }),
  linkPreviews: z
    .boolean({ error: 'expected true or false' })
    .default(false)
    .describe(
      "Let WhatsApp show a preview of the first link in the bot's text messages (`preview_url`). WhatsApp fetches a previewed link as the message is sent, nobody clicking: a link the model wrote (told to by text it read) carries what it holds to that site. Default false.",
    ),
});

/** WhatsApp channel settings after defaults. */
export type WhatsAppConfig = z.output<typeof whatsappConfigSchema>;
/** WhatsApp channel settings as written in a config file (defaults optional). */
export type WhatsAppConfigInput = z.input<typeof whatsappConfigSchema>;
