/**
 * The parts of Slack's Events API bodies and interactivity payloads steerbot
 * reads, validated with zod at the trust boundary (other fields pass
 * through unread).
 */
import { z } from 'zod';

const id = z.string().regex(/^[A-Z0-9]{1,32}$/);
const ts = z.string().regex(/^\d{1,12}\.\d{1,9}$/);

/** A file shared in a message (`files[]`). */
export const slackFileSchema = z.object({
  id: z.string().max(64),
  name: z.string().max(1024).optional(),
  mimetype: z.string().max(256).optional(),
  size: z.number().int().nonnegative().optional(),
  url_private: z.string().max(2048).optional(),
  url_private_download: z.string().max(2048).optional(),
});

/** A `message` or `app_mention` event (other event types are read as `other`). */
export const slackMessageEventSchema = z.object({
  type: z.enum(['message', 'app_mention']),
  channel: id,
  ts,
  user: id.optional(),
  text: z.string().max(40_000).optional(),
  subtype: z.string().max(64).optional(),
  bot_id: z.string().max(64).optional(),
  thread_ts: ts.optional(),
  channel_type: z.enum(['im', 'channel', 'group', 'mpim', 'app_home']).optional(),
  files: z.array(slackFileSchema).max(32).optional(),
});

/** An Events API request body: the URL check, or one event. */
export const slackEnvelopeSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('url_verification'), challenge: z.string().min(1).max(512) }),
  z.object({
    type: z.literal('event_callback'),
    event_id: z.string().max(128).optional(),
    /** Read further by its type: `slackMessageEventSchema` for messages and mentions; other types are not subscribed. */
    event: z.looseObject({ type: z.string().max(64) }),
  }),
]);

/** Any interactivity payload: read further by its type. */
export const slackInteractionTypeSchema = z.looseObject({ type: z.string().max(64) });

/** A button click (`block_actions`). */
export const slackBlockActionsSchema = z.object({
  type: z.literal('block_actions'),
  user: z.object({ id, username: z.string().max(256).optional(), name: z.string().max(256).optional() }),
  channel: z.object({ id }).optional(),
  container: z.object({ channel_id: id.optional(), message_ts: ts.optional(), thread_ts: ts.optional() }).optional(),
  message: z.object({ ts, thread_ts: ts.optional() }).optional(),
  actions: z
    .array(z.object({ action_id: z.string().max(255), value: z.string().max(2000).optional(), action_ts: z.string().max(64) }))
    .min(1)
    .max(25),
});

export type SlackMessageEvent = z.output<typeof slackMessageEventSchema>;
export type SlackBlockActions = z.output<typeof slackBlockActionsSchema>;
