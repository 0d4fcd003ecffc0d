/**
 * Configuration of the web chat (`channels.web`). The channel is on by
 * default, so `npm start` with nothing configured serves a chat page, private
 * to the operator (the console's login); `STEERBOT_WEB=false` turns it off,
 * `public: true` opens it to everyone the `access` section lets talk.
 */

import { enumOf, INPUT_POLICIES, int, isAddressOrRange, pageToken } from 'steerbot/plugin';
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
    maxStreamsPerClient: int(1, 10_000)
      .default(5)
      .describe('Most open chat pages of one client address (an IPv6 client: its /64) on one host; more get 429. Default 5.'),
    newConversationsPerHour: int(0, 1_000_000)
      .default(20)
      .describe(
        'New conversations one client address (an IPv6 client: its /64) may start, as a token bucket: this many at once, refilled evenly over an hour, counted in Redis across hosts. A message that would start one more gets 429 and writes nothing. 0 turns the limit off. Default 20.',
      ),
    trustedProxies: z
      .array(z.string().trim().refine(isAddressOrRange, { error: 'expected an IP address or a CIDR range like 10.0.0.0/8' }))
      .default([])
      .describe(
        "Addresses (or CIDR ranges) of the reverse proxies in front of the host. A request from one of them is counted against the client its `X-Forwarded-For` names (the right-most address that is not a listed proxy). Default `[]`: the TCP peer is the client, and behind a proxy every visitor shares the proxy's limits.",
      ),
  })
  .refine((c) => !(c.public && c.token !== undefined), { error: 'a public chat takes no token: remove `token`, or set `public` to false', path: ['token'] });

/** The web chat's settings, defaults applied. */
export type WebConfig = z.output<typeof webConfigSchema>;
