/**
 * Slack conversation ids: a direct message is one conversation
 * (`<channel id>:<DM channel>`), a thread in a channel is one
 * (`<channel id>:<channel>:<thread ts>`; a mention in a channel starts it,
 * its ts becomes the thread's). Update keys are `<channel id>:<channel>:<ts>`:
 * the same message arrives as `app_mention` and as `message` with different
 * event ids, and retried, always with the same channel and ts.
 */
import { InvalidInputError } from 'steerbot/plugin';

/** Name of the conversation key that marks a channel thread the bot is in (declared in the definition's `storage`). */
export const THREAD_KEY = 'thread';

/** Where a conversation's messages go. */
export interface SlackTarget {
  channel: string;
  /** Thread the replies go to; absent in a direct message. */
  threadTs?: string;
}

const CHANNEL_RE = /^[A-Z0-9]{1,32}$/;
const TS_RE = /^\d{1,12}\.\d{1,9}$/;

/** Builds the conversation id of a target. */
export function conversationIdOf(channelId: string, t: SlackTarget): string {
  return t.threadTs === undefined ? `${channelId}:${t.channel}` : `${channelId}:${t.channel}:${t.threadTs}`;
}

/** Parses `<channel id>:<channel>[:<thread ts>]`; throws InvalidInputError for any other conversation. */
export function parseConversationId(channelId: string, conversationId: string): SlackTarget {
  const prefix = `${channelId}:`;
  const [channel, threadTs, extra] = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length).split(':') : [];
  if (channel === undefined || !CHANNEL_RE.test(channel) || extra !== undefined || (threadTs !== undefined && !TS_RE.test(threadTs))) {
    throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  }
  return { channel, ...(threadTs !== undefined && { threadTs }) };
}

/** The update key of one Slack message. */
export function messageUpdateKey(channelId: string, channel: string, ts: string): string {
  return `${channelId}:${channel}:${ts}`;
}
