/** Configuration of the Matrix channel (`channels.matrix` in the config file), validated with zod at load. */

import { int, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

/** A Matrix user id, `@localpart:server`. */
const userId = z.string().regex(/^@[^\s:]+:\S+$/, { error: 'expected a Matrix user id like @bot:example.org' });
/** Who an invite may come from: a user id, or `:server` for everyone on that server. */
const inviter = z.string().regex(/^(@[^\s:]+)?:\S+$/, { error: 'expected a user id (@ann:example.org) or a server (:example.org)' });

/** Schema of the Matrix channel settings. Unknown keys are errors. */
export const matrixConfigSchema = z.strictObject({
  homeserverUrl: z
    .url({ protocol: /^https?$/ })
    .refine((u) => !u.endsWith('/'), { error: 'remove the trailing /' })
    .describe("Client-server API root of the bot account's homeserver, without a trailing slash, e.g. `https://matrix.example.org`. Required."),
  accessToken: z
    .string({ error: 'expected the access token of the bot account' })
    .min(16, { error: 'expected the access token of the bot account (at least 16 characters)' })
    .describe('Access token of the bot account (one device: sends with the same transaction id are idempotent per token). Secret: never logged. Required.'),
  userId: userId.describe("The bot account's user id, e.g. `@steerbot:example.org`: its own messages are ignored, typing is shown as it. Required."),
  autoJoin: z
    .union([z.boolean(), z.array(inviter)])
    .default(false)
    .describe(
      'Join rooms the bot is invited to: true from anyone, false never (join by hand), or only invites from these users (`@ann:example.org`) and servers (`:example.org`). Default false.',
    ),
  streaming: z.boolean().default(false).describe('Stream replies by editing one message in place (`m.replace`, throttled). Default false.'),
  streamEditIntervalMs: int(250, 60_000).default(1500).describe('Least time between two streaming edits of one message, in ms. Default 1500.'),
  reactions: reactionsSetting({ taken: '👀', answered: '✅', failed: '❌' }),
  linkPreviews: z
    .boolean()
    .default(false)
    .describe(
      "Let clients preview the links in the bot's messages. A client asks its homeserver for a preview as it shows a message, nobody clicking, and the homeserver fetches the link: a link the model wrote (told to by text it read) carries what it holds to that site. Default false: every message says it has no previews (an empty `com.beeper.linkpreviews`, MSC4095), which clients that read it honour; others preview by their own and the room's settings.",
    ),
  syncTimeoutMs: int(1000, 60_000).default(30_000).describe('Long-poll timeout of one `/sync` call, in ms. Default 30 000.'),
  syncLeaseMs: int(1000, 600_000)
    .default(60_000)
    .describe(
      'Lease of the one syncing host, in ms (renewed every third of it); a standby host takes over this long after the syncing one died. Default 60 000.',
    ),
  maxFileBytes: int(1, 2 ** 31)
    .default(52_428_800)
    .describe(
      "Largest file sent, in bytes, until the homeserver names its own limit (`m.upload.size` of `/_matrix/client/v1/media/config`, which wins). Default 52 428 800 (50 MiB, Synapse's default).",
    ),
  mediaTimeoutMs: int(1000, 600_000).default(120_000).describe('Timeout of one media upload or download, in ms. Default 120 000.'),
  timeoutMs: int(1000, 120_000).default(15_000).describe('Timeout of one call other than `/sync`, in ms. Default 15 000.'),
  rateLimitRetryMs: int(100, 600_000)
    .default(5000)
    .describe('Wait before a rate-limited call (429 `M_LIMIT_EXCEEDED`) is retried when the homeserver names no `retry_after_ms`, in ms. Default 5000.'),
});

/** Matrix channel settings after defaults. */
export type MatrixConfig = z.output<typeof matrixConfigSchema>;
/** Matrix channel settings as written in a config file (defaults optional). */
export type MatrixConfigInput = z.input<typeof matrixConfigSchema>;
