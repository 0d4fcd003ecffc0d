/**
 * Telegram update → normalized inbound message (pure). Decides which group
 * messages are addressed to the bot and builds the ids of DESIGN.md:
 * update key `telegram:<update_id>`, conversation `telegram:<chat>[:<topic>]`,
 * sender: the user's id, or `c<chat id>` for a message sent on behalf of a
 * chat (a channel, or a group's anonymous admins, who are the group itself).
 */
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import type { TelegramChat, TelegramEntity, TelegramMessage, TelegramUpdate, TelegramUser } from './update-schema.js';

/** The bot itself, from getMe. */
export interface BotIdentity {
  id: number;
  /** Username without `@`. */
  username: string;
}

/** What normalization needs besides the update. */
export interface NormalizeOptions {
  channelId: string;
  bot: BotIdentity;
  groups: 'mention' | 'always';
}

/** Why an update is not passed on. (Allow-lists are the host's: `receive` applies them.) */
export type SkipReason = 'not-a-message' | 'empty' | 'not-addressed';

/** Result of `normalizeUpdate`. `button`: a click on a button (its command is the message text), to be answered with `answerCallbackQuery`. */
export type Normalized =
  | { kind: 'message'; message: InboundMessage }
  | { kind: 'button'; message: InboundMessage; callbackId: string; chatId: number; messageId: number }
  | { kind: 'skip'; reason: SkipReason };

const COMMAND_RE = /^\/([A-Za-z0-9_]{1,64})(?:@([A-Za-z0-9_]{1,64}))?(?=\s|$)/;

/** Turns one update into an inbound message, or says why it is skipped. */
export function normalizeUpdate(update: TelegramUpdate, opts: NormalizeOptions): Normalized {
  if (update.callback_query) return normalizeButton(update, opts);
  const msg = update.message;
  if (!msg) return { kind: 'skip', reason: 'not-a-message' };
  const chatId = String(msg.chat.id);

  let text = msg.text ?? msg.caption ?? '';
  const entities = msg.entities ?? msg.caption_entities ?? [];
  const command = COMMAND_RE.exec(text);
  const isGroup = msg.chat.type !== 'private';
  if (command) {
    const target = command[2];
    // `/stop@OtherBot` in a group is for another bot.
    if (target !== undefined && target.toLowerCase() !== opts.bot.username.toLowerCase()) return { kind: 'skip', reason: 'not-addressed' };
    if (target !== undefined) text = `/${command[1]}${text.slice(command[0].length)}`;
  } else if (isGroup && opts.groups === 'mention' && !mentionsBot(text, entities, opts.bot) && !repliesToBot(msg, opts.bot)) {
    return { kind: 'skip', reason: 'not-addressed' };
  }

  const attachments = attachmentsOf(msg);
  if (text.trim().length === 0 && attachments.length === 0) return { kind: 'skip', reason: 'empty' };

  const threadId = msg.is_topic_message && msg.message_thread_id !== undefined ? `:${msg.message_thread_id}` : '';
  const message: InboundMessage = {
    conversationId: `${opts.channelId}:${chatId}${threadId}`,
    updateKey: `${opts.channelId}:${update.update_id}`,
    chatId,
    sender: senderOfMessage(msg),
    text,
    messageId: String(msg.message_id),
    ...(isGroup && { group: true }),
  };
  const replied = msg.reply_to_message;
  // In a forum topic every message "replies" to the topic's service message; that is not a reply.
  if (replied && !(msg.is_topic_message && replied.message_id === msg.message_thread_id)) {
    const repliedText = replied.text ?? replied.caption;
    message.replyTo = { messageId: String(replied.message_id), ...(repliedText !== undefined && { text: repliedText }) };
  }
  if (attachments.length > 0) message.attachments = attachments;
  return { kind: 'message', message };
}

/**
 * A button click under one of the bot's messages: its `callback_data` (a
 * control command) from the user who clicked. A click has no `sender_chat`:
 * `from` is always the real user, also one who posts as a channel or
 * anonymously, so a click decides as that person.
 */
function normalizeButton(update: TelegramUpdate, opts: NormalizeOptions): Normalized {
  const q = update.callback_query!;
  const msg = q.message;
  if (!msg?.chat || !q.data?.startsWith('/')) return { kind: 'skip', reason: 'not-a-message' };
  const chatId = String(msg.chat.id);
  const threadId = msg.is_topic_message && msg.message_thread_id !== undefined ? `:${msg.message_thread_id}` : '';
  const message: InboundMessage = {
    conversationId: `${opts.channelId}:${chatId}${threadId}`,
    updateKey: `${opts.channelId}:${update.update_id}`,
    chatId,
    sender: senderOf(q.from),
    text: q.data,
    interaction: 'button',
    ...(msg.chat.type !== 'private' && { group: true }),
  };
  return { kind: 'button', message, callbackId: q.id, chatId: msg.chat.id, messageId: msg.message_id };
}

/**
 * Who sent `msg`. Sent on behalf of a chat, `from` is a placeholder shared by
 * every such sender in every group (@Channel_Bot for channels,
 * @GroupAnonymousBot for anonymous admins), so the sender is `sender_chat`:
 * `c<chat id>`, which no user id (digits) can be. Without either the chat
 * itself speaks.
 */
function senderOfMessage(msg: TelegramMessage): InboundMessage['sender'] {
  if (msg.from && !msg.sender_chat) return senderOf(msg.from);
  const chat: TelegramChat = msg.sender_chat ?? msg.chat;
  const name = (chat.title || chat.username || '').slice(0, 256);
  return { id: `c${chat.id}`, ...(name && { name }) };
}

function senderOf(from: TelegramUser): InboundMessage['sender'] {
  const full = [from.first_name, from.last_name].filter((s) => s !== undefined && s.length > 0).join(' ');
  const name = (full || from.username || '').slice(0, 256);
  return { id: String(from.id), ...(name && { name }), ...(from.is_bot !== undefined && { isBot: from.is_bot }) };
}

/** True when the text mentions `@<bot username>` (by entity, or by text when the client sent no entities). */
export function mentionsBot(text: string, entities: readonly TelegramEntity[], bot: BotIdentity): boolean {
  const handle = `@${bot.username}`.toLowerCase();
  if (entities.length > 0) {
    return entities.some(
      (e) =>
        (e.type === 'mention' && text.slice(e.offset, e.offset + e.length).toLowerCase() === handle) || (e.type === 'text_mention' && e.user?.id === bot.id),
    );
  }
  const escaped = bot.username.replace(/[^A-Za-z0-9_]/g, '');
  return new RegExp(`(^|[^A-Za-z0-9_])@${escaped}(?![A-Za-z0-9_])`, 'i').test(text);
}

function repliesToBot(msg: TelegramMessage, bot: BotIdentity): boolean {
  return msg.reply_to_message?.from?.id === bot.id;
}

type FileLike = { file_id: string; file_name?: string | undefined; mime_type?: string | undefined; file_size?: number | undefined };

function ref(kind: Attachment['kind'], f: FileLike): Attachment {
  return {
    kind,
    ref: f.file_id,
    ...(f.file_name !== undefined && { name: f.file_name.slice(0, 512) }),
    ...(f.mime_type !== undefined && { mime: f.mime_type.slice(0, 128) }),
    ...(f.file_size !== undefined && { size: f.file_size }),
  };
}

/** Attachments by reference (`file_id`); for a photo only its largest size. */
function attachmentsOf(msg: TelegramMessage): Attachment[] {
  const out: Attachment[] = [];
  if (msg.photo && msg.photo.length > 0) {
    const largest = msg.photo.reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
    out.push(ref('image', largest));
  }
  // An animation also carries `document` (Telegram's compatibility copy); keep one reference.
  if (msg.document && !msg.animation) out.push(ref('file', msg.document));
  if (msg.voice) out.push(ref('audio', msg.voice));
  if (msg.audio) out.push(ref('audio', msg.audio));
  if (msg.video) out.push(ref('video', msg.video));
  if (msg.video_note) out.push(ref('video', msg.video_note));
  if (msg.animation) out.push(ref('video', msg.animation));
  if (msg.sticker) out.push(ref('sticker', msg.sticker));
  return out;
}
