/**
 * The outbound side of the Telegram channel: what delivery calls to send,
 * edit and show typing, through grammY's `Api`.
 */
import { type Api, InputFile } from 'grammy';
import type { ReactionTypeEmoji } from 'grammy/types';
import type { ChannelOutbound, EditOptions, MessageButton, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { fetchFile, InvalidInputError, type Logger, type ReactionsSetting } from 'steerbot/plugin';
import { isTelegramError, toChannelApiError } from './errors.js';
import { markdownToTelegramHtml } from './markdown.js';

/** Telegram's limit on one message's text, in characters (after entity parsing). */
export const TELEGRAM_MAX_MESSAGE_CHARS = 4096;

/** Largest file the Bot API takes in an upload, in bytes (50 MB). */
export const TELEGRAM_MAX_FILE_BYTES = 50 * 1000 * 1000;

/** Largest photo the Bot API takes, in bytes (10 MB): a larger image goes as a document. */
export const TELEGRAM_MAX_PHOTO_BYTES = 10 * 1000 * 1000;

/** Image types Telegram shows as a photo (others, GIF included, go as documents). */
const PHOTO_TYPES = new Set(['image/jpeg', 'image/png', 'image/webp']);

/** Where a conversation's messages go. */
export interface TelegramTarget {
  chatId: number;
  /** Forum topic (`message_thread_id`). */
  threadId?: number;
}

/** Parses `<channel id>:<chat id>[:<topic id>]`; throws InvalidInputError for any other conversation. */
export function parseConversationId(channelId: string, conversationId: string): TelegramTarget {
  const prefix = `${channelId}:`;
  const m = conversationId.startsWith(prefix) ? /^(-?\d+)(?::(\d+))?$/.exec(conversationId.slice(prefix.length)) : null;
  if (!m) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return { chatId: Number(m[1]), ...(m[2] !== undefined && { threadId: Number(m[2]) }) };
}

/** Options of `createTelegramOutbound`. */
export interface TelegramOutboundOptions {
  channelId: string;
  api: Api;
  /** The bot token, only to redact it from errors. */
  token: string;
  /** Offer streaming edits (`streamEditIntervalMs`). */
  streaming: boolean;
  /** Status reactions on the person's messages (`react`). Default none. */
  reactions?: ReactionsSetting;
  /** Let Telegram preview links in the bot's messages (`linkPreviews`). Default false: previews off. */
  linkPreviews?: boolean;
  logger: Logger;
  /** Bot API root files are downloaded from (`<apiRoot>/file/bot<token>/<file_path>`). Default `https://api.telegram.org`. */
  apiRoot?: string;
  /** Fetch for file downloads. Default: global fetch. */
  fetch?: typeof fetch;
}

const CANT_PARSE = /can't parse entities/i;
const NOT_MODIFIED = /message is not modified/i;

/** Any chat id is a conversation the bot may open; Telegram refuses users who never started the bot (403). */
function isChatOf(channelId: string, conversationId: string): boolean {
  try {
    parseConversationId(channelId, conversationId);
    return true;
  } catch {
    return false;
  }
}

/**
 * The link preview options of every text the bot sends or edits: previews
 * off unless the operator turned them on. Telegram fetches a previewed link
 * at once, so a link the model wrote would carry what it holds to that site
 * with nobody clicking. An edit without them previews its links again.
 */
export const linkPreviewsOf = (linkPreviews: boolean | undefined) => (linkPreviews ? {} : { link_preview_options: { is_disabled: true } });

/** The thread a message goes to, as Telegram's methods take it. */
const threadOf = (t: TelegramTarget) => (t.threadId !== undefined ? { message_thread_id: t.threadId } : {});

/** Runs one Bot API call; its failure becomes a ChannelApiError that never names the token. */
async function call<T>(token: string, method: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toChannelApiError(err, method, token);
  }
}

/** Two buttons side by side (Approve / Deny); more, one per row, so each option's label shows in full. */
function keyboardRows(buttons: readonly MessageButton[]): Array<Array<{ text: string; callback_data: string }>> {
  const keys = buttons.map((b) => ({ text: b.label, callback_data: b.command }));
  return keys.length <= 2 ? [keys] : keys.map((k) => [k]);
}

/** The reply parameters of a send, when it replies to a message by its numeric id. */
const replyOf = (replyTo: string | undefined) =>
  replyTo !== undefined && /^\d+$/.test(replyTo) ? { reply_parameters: { message_id: Number(replyTo), allow_sending_without_reply: true } } : {};

/** `sendMessage`: formatted first when asked (plain when Telegram cannot parse what the converter made of it), buttons as an inline keyboard. */
async function sendText(opts: TelegramOutboundOptions, conversationId: string, text: string, sendOpts: SendOptions): Promise<{ messageId: string }> {
  const { api, token, channelId, logger } = opts;
  const target = parseConversationId(channelId, conversationId);
  const base = {
    ...threadOf(target),
    ...linkPreviewsOf(opts.linkPreviews),
    // Buttons as an inline keyboard; a click comes back as a callback query carrying the command.
    ...(sendOpts.buttons?.length && { reply_markup: { inline_keyboard: keyboardRows(sendOpts.buttons) } }),
    ...replyOf(sendOpts.replyTo),
  };
  if (sendOpts.format === 'markdown') {
    try {
      const sent = await api.sendMessage(target.chatId, markdownToTelegramHtml(text), { ...base, parse_mode: 'HTML' });
      return { messageId: String(sent.message_id) };
    } catch (err) {
      if (!isTelegramError(err, 400, CANT_PARSE)) throw toChannelApiError(err, 'sendMessage', token);
      logger.debug({ conversationId }, 'telegram refused the formatted text; resending it as plain text');
    }
  }
  const sent = await call(token, 'sendMessage', () => api.sendMessage(target.chatId, text, base));
  return { messageId: String(sent.message_id) };
}

/** `sendVoice` for a spoken reply, `sendPhoto` for an image Telegram shows as a photo (at most 10 MB), `sendDocument` for anything else; the caption as plain text. */
async function sendFile(opts: TelegramOutboundOptions, conversationId: string, file: OutboundFile, sendOpts: SendFileOptions): Promise<{ messageId: string }> {
  const { api, token, channelId } = opts;
  const target = parseConversationId(channelId, conversationId);
  const input = new InputFile(file.bytes, file.name);
  const extra = { ...threadOf(target), ...replyOf(sendOpts.replyTo), ...(file.caption && { caption: file.caption }) };
  const sent = file.voice
    ? await call(token, 'sendVoice', () => api.sendVoice(target.chatId, input, extra))
    : PHOTO_TYPES.has(file.mimeType) && file.bytes.byteLength <= TELEGRAM_MAX_PHOTO_BYTES
      ? await call(token, 'sendPhoto', () => api.sendPhoto(target.chatId, input, extra))
      : await call(token, 'sendDocument', () => api.sendDocument(target.chatId, input, extra));
  return { messageId: String(sent.message_id) };
}

/** `editMessageText`, formatted first as `sendText`; editing to the same text is what the caller wanted already. */
async function editText(opts: TelegramOutboundOptions, conversationId: string, messageId: string, text: string, editOpts: EditOptions): Promise<void> {
  const { api, token, channelId, logger } = opts;
  const target = parseConversationId(channelId, conversationId);
  const id = Number(messageId);
  const previews = linkPreviewsOf(opts.linkPreviews);
  if (editOpts.format === 'markdown') {
    try {
      await api.editMessageText(target.chatId, id, markdownToTelegramHtml(text), { ...previews, parse_mode: 'HTML' });
      return;
    } catch (err) {
      if (isTelegramError(err, 400, NOT_MODIFIED)) return;
      if (!isTelegramError(err, 400, CANT_PARSE)) throw toChannelApiError(err, 'editMessageText', token);
      logger.debug({ conversationId }, 'telegram refused the formatted edit; editing to plain text');
    }
  }
  try {
    await api.editMessageText(target.chatId, id, text, previews);
  } catch (err) {
    if (isTelegramError(err, 400, NOT_MODIFIED)) return;
    throw toChannelApiError(err, 'editMessageText', token);
  }
}

/** Builds the outbound side. Every method throws ChannelApiError (429: with `retryAfterMs`). */
export function createTelegramOutbound(opts: TelegramOutboundOptions): ChannelOutbound {
  const { api, token, channelId } = opts;

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: TELEGRAM_MAX_MESSAGE_CHARS,
    send: (conversationId: string, text: string, sendOpts: SendOptions = {}) => sendText(opts, conversationId, text, sendOpts),
    edit: (conversationId: string, messageId: string, text: string, editOpts: EditOptions = {}) => editText(opts, conversationId, messageId, text, editOpts),
    sendFile: (conversationId: string, file: OutboundFile, sendOpts: SendFileOptions = {}) => sendFile(opts, conversationId, file, sendOpts),
    maxFileBytes: TELEGRAM_MAX_FILE_BYTES,

    async typing(conversationId: string) {
      const target = parseConversationId(channelId, conversationId);
      await call(token, 'sendChatAction', () => api.sendChatAction(target.chatId, 'typing', threadOf(target)));
    },

    async fetchAttachment(attachment, { maxBytes, signal }) {
      const tooLarge = (size: number) => new InvalidInputError(`attachment is ${size} bytes, more than ${maxBytes}`);
      if (attachment.size !== undefined && attachment.size > maxBytes) throw tooLarge(attachment.size);
      const file = await call(token, 'getFile', () => api.getFile(attachment.ref));
      if (file.file_size !== undefined && file.file_size > maxBytes) throw tooLarge(file.file_size);
      if (!file.file_path) throw new InvalidInputError('Telegram gave no path for the file (larger than the Bot API serves?)');
      // The URL carries the token: errors name the file instead.
      return fetchFile(`${opts.apiRoot ?? 'https://api.telegram.org'}/file/bot${token}/${file.file_path}`, {
        maxBytes,
        ...(signal && { signal }),
        ...(opts.fetch && { fetch: opts.fetch }),
        label: `Telegram file ${file.file_path}`,
      });
    },

    async isAdmin(conversationId: string, userId: string) {
      const { chatId } = parseConversationId(channelId, conversationId);
      // An anonymous admin writes as the group itself (sender `c<chat id>`, from its `sender_chat`): only admins can.
      if (userId === `c${chatId}`) return true;
      if (!/^\d{1,20}$/.test(userId)) return false;
      const member = await call(token, 'getChatMember', () => api.getChatMember(chatId, Number(userId)));
      return member.status === 'creator' || member.status === 'administrator';
    },
    opensConversation: (conversationId: string) => isChatOf(channelId, conversationId),
  };
  const reactions = opts.reactions;
  if (reactions) {
    outbound.react = async (conversationId, messageId, status) => {
      const { chatId } = parseConversationId(channelId, conversationId);
      // One reaction per message from the bot: setting one replaces the last.
      const emoji = reactions[status] as ReactionTypeEmoji['emoji'];
      await call(token, 'setMessageReaction', () => api.setMessageReaction(chatId, Number(messageId), [{ type: 'emoji', emoji }]));
    };
  }
  if (opts.streaming) {
    // Private chats have positive ids; Telegram throttles edits in groups harder.
    outbound.streamEditIntervalMs = (conversationId) => (parseConversationId(channelId, conversationId).chatId > 0 ? 1000 : 3000);
  }
  return outbound;
}
