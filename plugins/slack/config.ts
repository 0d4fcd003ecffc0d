/**
 * Configuration of the Slack channel (`channels.slack` in the config file),
 * validated with zod at load.
 */

import { enumOf, INPUT_POLICIES, reactionsSetting } from 'steerbot/plugin';
import { z } from 'zod';

const idList = z.array(z.string().regex(/^[A-Z0-9]{1,32}$/, { error: 'expected a Slack id like U0123ABCD' })).default([]);

const path = (fallback: string) =>
  z
    .string()
    .regex(/^\/[A-Za-z0-9/_.-]*$/, { error: 'expected a path starting with /' })
    .default(fallback);

/** Schema of the Slack channel settings (zod 4); parse a raw object with `slackConfigSchema.parse(raw)`. */
export const slackConfigSchema = z
  .strictObject({
    botToken: z
      .string()
      .regex(/^xoxb-[A-Za-z0-9-]+$/, { error: 'expected a bot token starting with xoxb-' })
      .describe('Bot User OAuth Token (`xoxb-…`, OAuth & Permissions page). Secret: never logged. Required.'),
    appToken: z
      .string()
      .regex(/^xapp-[A-Za-z0-9-]+$/, { error: 'expected an app-level token starting with xapp-' })
      .optional()
      .describe('App-level token (`xapp-…`, scope `connections:write`) for Socket Mode. When set, Socket Mode is the default. Secret.'),
    signingSecret: z
      .string()
      .regex(/^[A-Za-z0-9]{16,128}$/, { error: 'expected the Signing Secret from Basic Information (letters and digits)' })
      .optional()
      .describe('Signing Secret (Basic Information page): checks Events API and interactivity requests. Required in `events` mode. Secret.'),
    mode: z
      .enum(['socket', 'events'])
      .optional()
      .describe(
        'How events arrive: `socket` (Socket Mode, no public URL) or `events` (Slack POSTs to our routes). Default: `socket` when `appToken` is set, else `events`.',
      ),
    eventsPath: path('/slack/events').describe('Route of the Events API (events mode). Default `/slack/events`.'),
    interactivityPath: path('/slack/interactivity').describe('Route of button clicks (events mode). Default `/slack/interactivity`.'),
    apiUrl: z
      .url({ protocol: /^https?$/ })
      .refine((u) => u.endsWith('/'), { error: 'end it with /' })
      .default('https://slack.com/api/')
      .describe('Web API base URL, ending in `/` (a local fake in tests). Default `https://slack.com/api/`.'),
    filesOrigins: z
      .array(z.url({ protocol: /^https?$/ }))
      .default(['https://files.slack.com'])
      .describe('Origins the bot token is sent to when downloading shared files (besides `apiUrl`\'s). Default `["https://files.slack.com"]`.'),
    maxSkewSeconds: z
      .number()
      .int()
      .min(30)
      .max(3600)
      .default(300)
      .describe('Events mode: oldest `X-Slack-Request-Timestamp` accepted, in seconds from now (replays are refused). Default 300.'),
    policy: enumOf(INPUT_POLICIES)
      .optional()
      .describe('Deprecated: use `profiles.<name>.inputPolicy` bound to the channel (translated at load).')
      .meta({ deprecated: true }),
    allowedUsers: idList.describe('Deprecated: use `access.channels.slack.users` (translated at load).').meta({ deprecated: true }),
    allowedChats: idList.describe('Deprecated: use `access.channels.slack.groups` (translated at load).').meta({ deprecated: true }),
    admins: idList.describe('Deprecated: use `access.channels.slack.admins` (translated at load).').meta({ deprecated: true }),
    streaming: z.boolean().default(true).describe('Stream replies by editing one message in place with `chat.update` (throttled). Default true.'),
    reactions: reactionsSetting({ taken: 'eyes', answered: 'white_check_mark', failed: 'x' }),
    linkPreviews: z
      .boolean()
      .default(false)
      .describe(
        "Let Slack unfurl links and media in the bot's messages (`unfurl_links`, `unfurl_media`). Slack's servers fetch an unfurled link as soon as the message is posted, nobody clicking: a link the model wrote (told to by text it read) carries what it holds to that site. Default false: both off on every `chat.postMessage`.",
      ),
    streamEditIntervalMs: z
      .number()
      .int()
      .min(500)
      .max(60_000)
      .default(1200)
      .describe('Least time between two streaming edits of one message, in ms (`chat.update` is Tier 3, about 50 a minute). Default 1200.'),
  })
  .superRefine((c, ctx) => {
    if (modeOf(c) === 'events' && c.signingSecret === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['signingSecret'],
        message: 'required in events mode (set SLACK_SIGNING_SECRET, or SLACK_APP_TOKEN for Socket Mode)',
      });
    }
    if (c.mode === 'socket' && c.appToken === undefined) {
      ctx.addIssue({ code: 'custom', path: ['appToken'], message: 'required in socket mode (an xapp- token with connections:write)' });
    }
  });

/** How events arrive, after defaults: Socket Mode when an app-level token is set. */
export function modeOf(c: { mode?: 'socket' | 'events' | undefined; appToken?: string | undefined }): 'socket' | 'events' {
  return c.mode ?? (c.appToken !== undefined ? 'socket' : 'events');
}

/** Slack channel settings after defaults. */
export type SlackConfig = z.output<typeof slackConfigSchema>;
/** Slack channel settings as written in a config file (defaults optional). */
export type SlackConfigInput = z.input<typeof slackConfigSchema>;
