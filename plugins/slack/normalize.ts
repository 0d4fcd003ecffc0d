/**
 * Slack events → normalized inbound messages (pure). Decides which messages
 * are addressed to the bot: every DM; in channels, a mention (which starts
 * a thread) and any message in a thread the bot is in. Bot messages, edits,
 * deletions and other subtypes are skipped.
 */
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import { ACTION_PREFIX } from './blocks.js';
import { conversationIdOf, messageUpdateKey } from './conversation.js';
import type { SlackBlockActions, SlackMessageEvent } from './event-schema.js';

/** The bot itself, from `auth.test`. */
export interface BotIdentity {
  userId: string;
  botId?: string;
}

/** Why an event is not passed on. (Allow-lists are the host's: `receive` applies them.) */
export type SkipReason = 'not-a-message' | 'from-a-bot' | 'empty' | 'not-addressed';

/**
 * Result of `normalizeMessage`. `threadOnly`: a channel message in a thread
 * without a mention, addressed only when the bot is in that thread.
 */
export type NormalizedMessage = { kind: 'message'; message: InboundMessage; threadOnly: boolean } | { kind: 'skip'; reason: SkipReason };

/** Subtypes that are a user's new message; every other subtype (edits, deletions, joins, bot messages) is skipped. */
const USER_SUBTYPES = new Set(['file_share', 'thread_broadcast']);

/**
 * Slack's text → plain text: links as `text (url)`, entities decoded; mentions of the bot removed.
 * Slack escapes a typed `<`, so an entity never holds one: no rule scans past the next `<`, which keeps
 * each linear in the text (scanning on to the end from every `<` took 0.3 s on 40 000 crafted characters).
 */
export function plainText(text: string, bot: BotIdentity): string {
  return text
    .replaceAll(`<@${bot.userId}>`, '')
    .replace(/<((?:https?|mailto):[^|<>]+)\|([^<>]+)>/g, '$2 ($1)')
    .replace(/<((?:https?|mailto):[^<>]+)>/g, '$1')
    .replace(/<@([A-Z0-9]+)(?:\|[^<>]*)?>/g, '@$1')
    .replace(/<#([A-Z0-9]+)\|([^<>]*)>/g, '#$2')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .trim();
}

/** Turns one `message` / `app_mention` event into an inbound message, or says why it is skipped. */
export function normalizeMessage(e: SlackMessageEvent, channelId: string, bot: BotIdentity): NormalizedMessage {
  if (e.subtype !== undefined && !USER_SUBTYPES.has(e.subtype)) return { kind: 'skip', reason: 'not-a-message' };
  if (e.bot_id !== undefined || e.user === undefined || e.user === bot.userId) return { kind: 'skip', reason: 'from-a-bot' };
  const raw = e.text ?? '';
  const mentioned = e.type === 'app_mention' || raw.includes(`<@${bot.userId}>`);
  // `app_mention` carries no channel_type; it never fires in a DM.
  const dm = e.type === 'message' && e.channel_type === 'im';
  if (!dm && !mentioned && e.thread_ts === undefined) return { kind: 'skip', reason: 'not-addressed' };
  const text = plainText(raw, bot);
  const attachments = attachmentsOf(e);
  if (text.length === 0 && attachments.length === 0) return { kind: 'skip', reason: 'empty' };
  const message: InboundMessage = {
    // A mention outside a thread starts one: its own ts is the thread's.
    conversationId: conversationIdOf(channelId, dm ? { channel: e.channel } : { channel: e.channel, threadTs: e.thread_ts ?? e.ts }),
    updateKey: messageUpdateKey(channelId, e.channel, e.ts),
    chatId: e.channel,
    sender: { id: e.user },
    text,
    messageId: e.ts,
    ...(!dm && { group: true }),
    ...(attachments.length > 0 && { attachments }),
  };
  return { kind: 'message', message, threadOnly: !dm && !mentioned };
}

function kindOf(mime: string | undefined): Attachment['kind'] {
  if (mime?.startsWith('image/')) return 'image';
  if (mime?.startsWith('audio/')) return 'audio';
  if (mime?.startsWith('video/')) return 'video';
  return 'file';
}

/** Shared files by reference: their download URL, fetched later with the bot token. */
function attachmentsOf(e: SlackMessageEvent): Attachment[] {
  return (e.files ?? []).flatMap((f) => {
    const ref = f.url_private_download ?? f.url_private;
    if (ref === undefined) return [];
    return [
      {
        kind: kindOf(f.mimetype),
        ref,
        ...(f.name !== undefined && { name: f.name.slice(0, 512) }),
        ...(f.mimetype !== undefined && { mime: f.mimetype.slice(0, 128) }),
        ...(f.size !== undefined && { size: f.size }),
      },
    ];
  });
}

/** A click on one of our buttons: the command it sends, and where the message with the buttons is. */
export interface NormalizedClick {
  message: InboundMessage;
  channel: string;
  messageTs: string | undefined;
  userId: string;
}

/** Turns a `block_actions` payload into the click's command message, or undefined when it is not a click on our buttons. */
export function normalizeClick(p: SlackBlockActions, channelId: string): NormalizedClick | undefined {
  const action = p.actions.find((a) => a.action_id.startsWith(ACTION_PREFIX) && a.value?.startsWith('/'));
  const channel = p.channel?.id ?? p.container?.channel_id;
  if (!action?.value || channel === undefined) return undefined;
  const messageTs = p.message?.ts ?? p.container?.message_ts;
  // The bot answers in a thread everywhere but in DMs: the thread names the conversation.
  const threadTs = p.message?.thread_ts ?? p.container?.thread_ts;
  const name = p.user.name ?? p.user.username;
  const message: InboundMessage = {
    conversationId: conversationIdOf(channelId, { channel, ...(threadTs !== undefined && { threadTs }) }),
    updateKey: `${channelId}:${channel}:click:${action.action_ts}:${p.user.id}`,
    chatId: channel,
    sender: { id: p.user.id, ...(name !== undefined && { name: name.slice(0, 256) }) },
    text: action.value,
    interaction: 'button',
    ...(!channel.startsWith('D') && { group: true }),
  };
  return { message, channel, messageTs, userId: p.user.id };
}
