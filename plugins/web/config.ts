/**
 * Configuration of the web chat (`channels.web`). The channel is on by
 * default, so `npm start` with nothing configured serves a chat page;
 * `STEERBOT_WEB=false` turns it off.
 */

import { enumOf, INPUT_POLICIES, int, pageToken } from 'steerbot/channel';
import { z } from 'zod';

/** Schema of the web chat's settings. Unknown keys are errors. */
export const webConfigSchema = z.strictObject({
  enabled: z.boolean({ error: 'expected true or false' }).default(true).describe('Serve the web chat at `/` (and `/chat`). Default true.'),
  token: pageToken
    .optional()
    .describe(
      'Token a browser must present (open the page once with `?token=<token>`; it is kept in a cookie). Secret. Default: unset — only loopback clients (peer 127.0.0.0/8 or ::1, not proxied, Host a loopback name) may chat.',
    ),
  policy: enumOf(INPUT_POLICIES).optional().describe("Input policy of the web chat's conversations. Default: `dispatch.defaultPolicy`."),
  streamEditIntervalMs: int(50, 10_000).default(250).describe('Least time between two updates of a streamed answer, in ms. Default 250.'),
  maxMessageChars: int(64, 1_000_000).default(16_000).describe('Longest reply message, in characters; longer replies are split. Default 16 000.'),
  eventStreamMaxLen: int(10, 100_000)
    .default(500)
    .describe("Events (replies, edits, typing) kept per conversation for the page's event stream (approximate, `MAXLEN ~`). Default 500."),
  historyEntries: int(0, 1000).default(100).describe('Recent record entries and replies a page that opens (or reloads) is shown. Default 100.'),
  maxStreamClients: int(1, 10_000).default(100).describe('Most open chat pages at once (each holds a Redis connection); more get 503. Default 100.'),
});

/** The web chat's settings, defaults applied. */
export type WebConfig = z.output<typeof webConfigSchema>;
