/**
 * Configuration of the Telegram channel (`channels.telegram` in the config
 * file), validated with zod at load.
 */

import { enumOf, INPUT_POLICIES, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

const idList = z
  .array(z.union([z.string().regex(/^-?\d{1,20}$/, { error: 'expected a numeric Telegram id' }), z.number().int()]))
  .transform((ids) => ids.map(String))
  .default([]);

/** Schema of the Telegram channel settings (zod 4); parse a raw object with `telegramConfigSchema.parse(raw)`. */
export const telegramConfigSchema = z
  .strictObject({
    token: z
      .string()
      .regex(/^\d+:[A-Za-z0-9_-]+$/, { error: 'expected a bot token like 123456:ABC-DEF…' })
      .describe('Bot token from @BotFather. Secret: never logged. Required.'),
    mode: z
      .enum(['webhook', 'polling'])
      .default('polling')
      .describe('How updates arrive: `webhook` (Telegram POSTs to us) or `polling` (getUpdates). Default `polling`.'),
    webhookSecret: z
      .string()
      .min(16, { error: 'expected at least 16 characters' })
      .max(256, { error: 'expected at most 256 characters' })
      .regex(/^[A-Za-z0-9_-]+$/, { error: 'Telegram allows only A-Z, a-z, 0-9, _ and -' })
      .optional()
      .describe('`secret_token` Telegram sends in `X-Telegram-Bot-Api-Secret-Token`; webhook mode only, required there, 16-256 of `A-Z a-z 0-9 _ -`. Secret.'),
    webhookPath: z
      .string()
      .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
      .default('/telegram/webhook')
      .describe('Route the webhook is served on. Default `/telegram/webhook`.'),
    webhookUrl: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('Public HTTPS URL of the webhook; when set, `setWebhook` is called at start. Default: unset (register it yourself).'),
    apiRoot: z
      .url({ protocol: /^https?$/ })
      .refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })
      .default('https://api.telegram.org')
      .describe('Bot API server root, without a trailing slash (a self-hosted Bot API server, or a local fake in tests). Default `https://api.telegram.org`.'),
    groups: z
      .enum(['mention', 'always'])
      .default('mention')
      .describe('In groups: `mention` answers when the bot is mentioned or replied to (commands always); `always` answers every message. Default `mention`.'),
    policy: enumOf(INPUT_POLICIES)
      .optional()
      .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
      .meta({ deprecated: true }),
    allowedUsers: idList.describe('Deprecated: use `access.channels.telegram.users` (translated at load).').meta({ deprecated: true }),
    allowedChats: idList.describe('Deprecated: use `access.channels.telegram.groups` / `users` (translated at load).').meta({ deprecated: true }),
    admins: idList.describe('Deprecated: use `access.channels.telegram.admins` (translated at load).').meta({ deprecated: true }),
    streaming: z.boolean().default(false).describe('Stream replies by editing one message in place (throttled). Default false.'),
    linkPreviews: z
      .boolean()
      .default(false)
      .describe(
        "Let Telegram show link previews under the bot's messages. Telegram's servers fetch a link to build its preview as soon as the message is sent, nobody clicking: a link the model wrote (told to by text it read) carries what it holds to that site. Default false: every message the bot sends or edits has `link_preview_options.is_disabled`.",
      ),
    reactions: reactionsSetting({ taken: '👀', answered: '👍', failed: '😢' }),
    registerCommands: z.boolean().default(true).describe('Register /stop, /new, /compact, /queue, /status with `setMyCommands` at start. Default true.'),
    pollingLeaseMs: z
      .number()
      .int()
      .min(1000)
      .max(600_000)
      .default(30_000)
      .describe('Polling mode: lease of the one polling host, in ms; a standby host takes over this long after the poller died. Default 30000.'),
    pollTimeoutSeconds: z.number().int().min(1).max(50).default(25).describe('Polling mode: long-poll timeout of one getUpdates call, in seconds. Default 25.'),
  })
  .superRefine((c, ctx) => {
    if (c.mode === 'webhook' && c.webhookSecret === undefined) {
      ctx.addIssue({ code: 'custom', path: ['webhookSecret'], message: 'required in webhook mode (at least 16 characters)' });
    }
  });

/** Telegram channel settings after defaults. */
export type TelegramConfig = z.output<typeof telegramConfigSchema>;
/** Telegram channel settings as written in a config file (defaults optional). */
export type TelegramConfigInput = z.input<typeof telegramConfigSchema>;
