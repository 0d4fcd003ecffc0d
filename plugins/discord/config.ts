/** Configuration of the Discord channel (`channels.discord` in the config file). */

import { enumOf, INPUT_POLICIES, int, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

const snowflake = z.string().regex(/^\d{1,25}$/, { error: 'expected a Discord id (digits)' });

/** Schema of the Discord channel's configuration. Unknown keys are errors. */
export const discordConfigSchema = z.strictObject({
  token: z
    .string({ error: 'expected the bot token' })
    .min(1, { error: 'expected the bot token' })
    .describe('Bot token from the Developer Portal. Secret: never logged, redacted from errors. Required.'),
  apiBase: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .default('https://discord.com/api')
    .describe('REST API base (discord.js `rest.api`); the gateway URL is read from `<apiBase>/v10/gateway/bot`. Default `https://discord.com/api`.'),
  alwaysChannels: z.array(snowflake).default([]).describe('Guild channel ids where the bot answers every message, not only when mentioned. Default `[]`.'),
  policy: enumOf(INPUT_POLICIES)
    .optional()
    .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
    .meta({ deprecated: true }),
  allowedUsers: z.array(snowflake).default([]).describe('Deprecated: use `access.channels.discord.users` (translated at load).').meta({ deprecated: true }),
  allowedChats: z.array(snowflake).default([]).describe('Deprecated: use `access.channels.discord.groups` (translated at load).').meta({ deprecated: true }),
  admins: z.array(snowflake).default([]).describe('Deprecated: use `access.channels.discord.admins` (translated at load).').meta({ deprecated: true }),
  streaming: z
    .boolean({ error: 'expected true or false' })
    .default(false)
    .describe('Stream replies by editing one message in place (at most one edit per 1500 ms). Default false.'),
  reactions: reactionsSetting({ taken: '👀', answered: '✅', failed: '❌' }),
  linkPreviews: z
    .boolean({ error: 'expected true or false' })
    .default(false)
    .describe(
      "Let Discord embed previews of the links in the bot's messages. Discord's servers fetch a link to build its embed as soon as the message is posted, nobody clicking: a link the model wrote (told to by text it read) carries what it holds to that site. Default false: every message the bot sends or edits, and every answer to a button click, has the `SUPPRESS_EMBEDS` flag.",
    ),
  answerBots: z.boolean({ error: 'expected true or false' }).default(false).describe('Answer messages written by other bots (never its own). Default false.'),
  maxRateLimitWaitMs: int(0, 600_000)
    .default(10_000)
    .describe(
      'Longest REST rate-limit wait handled inside the client, in ms; a longer `retry_after` fails the call with ChannelApiError (`retryAfterMs` set) so delivery can reschedule it. Default 10 000.',
    ),
  ingestRetryDelayMs: int(1, 60_000)
    .default(500)
    .describe('First delay before a message that could not be handed to the host (Redis unreachable) is retried, in ms; doubles up to 30 s. Default 500.'),
  ingestRetryBacklog: int(1, 100_000)
    .default(1000)
    .describe('Most inbound messages held in memory while the host cannot take them; more are dropped (logged). Default 1000.'),
  catchUpMaxAgeSeconds: int(0, 14 * 86_400)
    .default(86_400)
    .describe(
      'At start, messages sent while no host was connected are read back over REST if they are at most this old, in seconds; 0 turns catch-up off. Default 86 400 (24 h, as long as Telegram keeps undelivered updates).',
    ),
  catchUpChannels: int(1, 10_000).default(100).describe('Channels read back at start, the most recently active first (one REST call each). Default 100.'),
});

/** The Discord channel's configuration, defaults applied. */
export type DiscordConfig = z.output<typeof discordConfigSchema>;
/** What the config file may contain for the Discord channel. */
export type DiscordConfigInput = z.input<typeof discordConfigSchema>;
