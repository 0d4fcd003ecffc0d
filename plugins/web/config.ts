/**
 * Configuration of the web chat (`channels.web`). The channel is on by
 * default, so `npm start` with nothing configured serves a chat page, private
 * to the operator (the console's login); `STEERBOT_WEB=false` turns it off,
 * `public: true` opens it to everyone the `access` section lets talk.
 */

import { enumOf, INPUT_POLICIES, int, pageToken } from 'steerbot/plugin';
import { z } from 'zod';

/** Schema of the web chat's settings. Unknown keys are errors. */
export const webConfigSchema = z
  .strictObject({
    enabled: z.boolean({ error: 'expected true or false' }).default(true).describe('Serve the web chat at `/` (and `/chat`). Default true.'),
    public: z
      .boolean({ error: 'expected true or false' })
      .default(false)
      .describe(
        "Open the chat to everyone who reaches it, with no login; the `access` section (`access.channels.web`) then decides who may talk, as on any channel. Default false: private, only the operator's login (the console's) and `token` open it.",
      ),
    token: pageToken
      .optional()
      .describe(
        "A chat-only token: whoever opens the page once with `?token=<token>` (it is kept in a cookie) may chat, without getting into the console. Secret. Default: unset — only the operator's login opens the private chat.",
      ),
    policy: enumOf(INPUT_POLICIES)
      .optional()
      .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
      .meta({ deprecated: true }),
    streamEditIntervalMs: int(50, 10_000).default(250).describe('Least time between two updates of a streamed answer, in ms. Default 250.'),
    maxMessageChars: int(64, 1_000_000).default(16_000).describe('Longest reply message, in characters; longer replies are split. Default 16 000.'),
    eventStreamMaxLen: int(10, 100_000)
      .default(500)
      .describe("Events (replies, edits, typing) kept per conversation for the page's event stream (approximate, `MAXLEN ~`). Default 500."),
    historyEntries: int(0, 1000).default(100).describe('Recent record entries and replies a page that opens (or reloads) is shown. Default 100.'),
    fileTtlSeconds: int(60, 30 * 86_400)
      .default(86_400)
      .describe(
        'How long a file the agent sent can be shown or downloaded in the chat, in seconds (its bytes expire from Redis then). Default 86 400 (a day).',
      ),
    maxFileBytes: int(1024, 50 * 1024 * 1024)
      .default(20 * 1024 * 1024)
      .describe('Largest file the chat shows, in bytes; a larger one becomes a text message. Default 20 971 520 (20 MiB).'),
    maxStreamClients: int(1, 10_000).default(100).describe('Most open chat pages at once (each holds a Redis connection); more get 503. Default 100.'),
  })
  .refine((c) => !(c.public && c.token !== undefined), { error: 'a public chat takes no token: remove `token`, or set `public` to false', path: ['token'] });

/** The web chat's settings, defaults applied. */
export type WebConfig = z.output<typeof webConfigSchema>;
