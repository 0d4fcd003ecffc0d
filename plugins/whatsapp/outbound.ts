/**
 * The outbound side of the WhatsApp channel: replies through
 * `POST /{phone-number-id}/messages` (text, or interactive reply buttons for
 * an approval), files (uploaded to `/{phone-number-id}/media`, then sent as
 * an image or document message naming the media id), the read receipt with
 * the typing indicator, and media downloads for the attachment resolver. WhatsApp cannot edit a message, so
 * the channel does not stream: a reply goes out whole when the turn ends.
 * A reply WhatsApp refuses (the 24-hour window closed, any other 4xx) is
 * recorded for the console before the error is thrown; delivery does not
 * retry it.
 */
import type { ChannelOutbound, MessageButton, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { InvalidInputError, type Logger, type ReactionsSetting, type RedisClient } from 'steerbot/plugin';
import { WhatsAppApiError } from './errors.js';
import { recordFailure } from './failures.js';
import type { GraphClient, MediaInfo } from './graph.js';
import { lastInboundKey } from './keys.js';
import { markdownToWhatsApp } from './markdown.js';

/** WhatsApp's limit on a text message's body, in characters. */
export const WHATSAPP_MAX_MESSAGE_CHARS = 4096;
/** Largest media WhatsApp takes, in bytes: a document (100 MB); an image at most 5 MB, a larger one goes as a document. */
export const WHATSAPP_MAX_FILE_BYTES = 100 * 1000 * 1000;
const WHATSAPP_MAX_IMAGE_BYTES = 5 * 1000 * 1000;
/** Image types WhatsApp shows as an image. */
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png']);
/** Limits of an interactive reply-button message: body characters, buttons, a title's characters, an id's characters. */
const BUTTON_BODY_MAX = 1024;
const MAX_BUTTONS = 3;
const BUTTON_TITLE_MAX = 20;
const BUTTON_ID_MAX = 256;
/** Most conversations whose last typing indicator time is remembered (the oldest is forgotten first). */
const TYPING_MEMORY = 1000;
/** Most two-part replies whose first part is remembered as sent (the oldest is forgotten first). */
const SPLIT_MEMORY = 1000;

/** Parses `<channel id>:<wa_id>` (`conversationIdOf`'s); throws InvalidInputError for any other conversation. */
export function recipientOf(channelId: string, conversationId: string): string {
  const prefix = `${channelId}:`;
  const id = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  if (!/^\d{1,32}$/.test(id)) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return id;
}

/** Options of `createWhatsAppOutbound`. */
export interface WhatsAppOutboundOptions {
  channelId: string;
  phoneNumberId: string;
  graph: GraphClient;
  redis: RedisClient;
  prefix: string;
  /** Least time between two typing indicators of one conversation, in ms. */
  typingRefreshMs: number;
  logger: Logger;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** Status reactions on the person's messages; absent: none. */
  reactions?: ReactionsSetting;
  /** Let WhatsApp preview the first link of a text message (`linkPreviews`). Default false. */
  linkPreviews?: boolean;
}

/**
 * The `messages` request body of one reply: text, or reply buttons under a body (buttons past three are named in the body).
 * `previews`: a text message's first link previewed (`preview_url`), which WhatsApp fetches as it sends it; off unless the operator turned it on.
 */
export function messageBody(
  to: string,
  text: string,
  buttons: readonly MessageButton[] | undefined,
  replyTo: string | undefined,
  previews: boolean,
): Record<string, unknown> {
  const base = { messaging_product: 'whatsapp', recipient_type: 'individual', to, ...(replyTo !== undefined && { context: { message_id: replyTo } }) };
  const usable = (buttons ?? []).filter((b) => b.command.length <= BUTTON_ID_MAX);
  if (usable.length === 0) return { ...base, type: 'text', text: { body: text, preview_url: previews } };
  const shown = usable.slice(0, MAX_BUTTONS);
  const rest = usable.slice(MAX_BUTTONS);
  const extra = rest.length > 0 ? `\n\n${rest.map((b) => `${b.label}: send ${b.command}`).join('\n')}` : '';
  return {
    ...base,
    type: 'interactive',
    interactive: {
      type: 'button',
      body: { text: `${text}${extra}`.slice(0, BUTTON_BODY_MAX) },
      action: { buttons: shown.map((b) => ({ type: 'reply', reply: { id: b.command, title: b.label.slice(0, BUTTON_TITLE_MAX) } })) },
    },
  };
}

/** The `messages` request body of a file uploaded as `mediaId`: an audio message for a spoken reply (OGG/Opus plays as a voice message), an image message, or a document with its file name. */
function fileMessageBody(to: string, file: OutboundFile, mediaId: string, replyTo: string | undefined): Record<string, unknown> {
  const image = IMAGE_TYPES.has(file.mimeType) && file.bytes.byteLength <= WHATSAPP_MAX_IMAGE_BYTES;
  const caption = file.caption ? { caption: file.caption } : {};
  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to,
    ...(replyTo !== undefined && { context: { message_id: replyTo } }),
    ...(file.voice
      ? { type: 'audio', audio: { id: mediaId } }
      : image
        ? { type: 'image', image: { id: mediaId, ...caption } }
        : { type: 'document', document: { id: mediaId, filename: file.name, ...caption } }),
  };
}

/** The multipart form of a media upload. */
function mediaForm(file: OutboundFile): FormData {
  const form = new FormData();
  form.set('messaging_product', 'whatsapp');
  form.set('type', file.mimeType);
  form.set('file', new Blob([Buffer.from(file.bytes)], { type: file.mimeType }), file.name);
  return form;
}

/** Uploads `file` to the phone number's media; returns the media id. */
async function uploadMedia(graph: GraphClient, phoneNumberId: string, file: OutboundFile): Promise<string> {
  const uploaded = await graph.upload('media upload', `${phoneNumberId}/media`, mediaForm(file));
  if (typeof uploaded.id !== 'string') throw new WhatsAppApiError('whatsapp media upload: the answer named no media id', { status: 502 });
  return uploaded.id;
}

/** The message id a `messages` answer names. */
function sentId(answer: Record<string, unknown>): string {
  const id = (answer.messages as Array<{ id?: unknown }> | undefined)?.[0]?.id;
  if (typeof id !== 'string') throw new WhatsAppApiError('whatsapp send: the answer named no message id', { status: 502 });
  return id;
}

/** Builds the outbound side. Every method throws ChannelApiError (a WhatsAppApiError; 429: `retryAfterMs`). */
export function createWhatsAppOutbound(o: WhatsAppOutboundOptions): ChannelOutbound {
  const { graph, channelId } = o;
  const now = o.now ?? Date.now;
  const lastTyping = new Map<string, number>();
  // Delivery keys of two-part replies (text, then buttons) whose text went out: a retry of the send (the buttons
  // failed on a 429 or 5xx) sends only the buttons, so the text is not shown twice.
  const textSent = new Set<string>();
  const messagesPath = `${o.phoneNumberId}/messages`;
  const previews = o.linkPreviews === true;

  async function post(conversationId: string, body: Record<string, unknown>, deliveryKey: string | undefined): Promise<string> {
    try {
      return sentId(await graph.post('send', messagesPath, body));
    } catch (err) {
      // Refused for good (not a rate limit, not the server's fault): recorded for the console, then given up by delivery.
      if (err instanceof WhatsAppApiError && err.status !== undefined && err.status >= 400 && err.status < 500 && err.retryAfterMs === undefined) {
        await recordFailure(o.redis, o.prefix, conversationId, deliveryKey ?? `send:${now()}`, {
          source: 'send',
          ...(err.graphCode !== undefined && { code: err.graphCode }),
          title: err.message.slice(0, 300),
          at: now(),
        }).catch((e: unknown) => o.logger.warn({ err: e }, 'could not record the failed reply'));
      }
      throw err;
    }
  }

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: WHATSAPP_MAX_MESSAGE_CHARS,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const to = recipientOf(channelId, conversationId);
      const formatted = opts.format === 'markdown' ? markdownToWhatsApp(text) : text;
      // Formatting may lengthen a text (a link's URL in brackets): past the limit the part goes as written.
      const body = formatted.length <= WHATSAPP_MAX_MESSAGE_CHARS ? formatted : text;
      const replyTo = opts.replyTo?.startsWith('wamid.') ? opts.replyTo : undefined;
      if (opts.buttons?.length && body.length > BUTTON_BODY_MAX) {
        // Too long for a button message's body: the text goes first, the buttons under a short line after it.
        const key = opts.deliveryKey;
        if (key === undefined || !textSent.has(key)) {
          await post(conversationId, messageBody(to, body, undefined, replyTo, previews), key);
          if (key !== undefined) remember(textSent, key, SPLIT_MEMORY);
        }
        const messageId = await post(conversationId, messageBody(to, 'Choose:', opts.buttons, undefined, previews), key);
        if (key !== undefined) textSent.delete(key);
        return { messageId };
      }
      return { messageId: await post(conversationId, messageBody(to, body, opts.buttons, replyTo, previews), opts.deliveryKey) };
    },

    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) {
      const to = recipientOf(channelId, conversationId);
      const mediaId = await uploadMedia(graph, o.phoneNumberId, file);
      const replyTo = opts.replyTo?.startsWith('wamid.') ? opts.replyTo : undefined;
      return { messageId: await post(conversationId, fileMessageBody(to, file, mediaId, replyTo), opts.deliveryKey) };
    },
    maxFileBytes: WHATSAPP_MAX_FILE_BYTES,

    // The typing call is the read receipt too: sent as soon as a run starts, however quick its answer.
    typingDelayMs: 0,
    async typing(conversationId: string) {
      const at = now();
      if (at - (lastTyping.get(conversationId) ?? -Infinity) < o.typingRefreshMs) return;
      recipientOf(channelId, conversationId);
      // The indicator is tied to a message the user sent (it is marked read too); none known, none shown.
      const messageId = await o.redis.get(lastInboundKey(o.prefix, conversationId));
      if (!messageId) return;
      await graph.post('typing', messagesPath, { messaging_product: 'whatsapp', status: 'read', message_id: messageId, typing_indicator: { type: 'text' } });
      lastTyping.delete(conversationId);
      lastTyping.set(conversationId, at);
      if (lastTyping.size > TYPING_MEMORY) lastTyping.delete(lastTyping.keys().next().value as string);
    },

    fetchAttachment: (attachment, opts) => fetchMedia(graph, attachment.ref, opts),
  };
  const reactions = o.reactions;
  if (reactions) {
    // A reaction message replaces the bot's last reaction on that message.
    outbound.react = async (conversationId, messageId, status) => {
      const to = recipientOf(channelId, conversationId);
      await graph.post('send', messagesPath, {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to,
        type: 'reaction',
        reaction: { message_id: messageId, emoji: reactions[status] },
      });
    };
  }
  return outbound;
}

/** Downloads an inbound media file by its id: its URL from the Graph API, then the bytes (at most `maxBytes`). */
async function fetchMedia(graph: GraphClient, ref: string, { maxBytes, signal }: { maxBytes: number; signal?: AbortSignal }) {
  if (!/^[A-Za-z0-9_.-]{1,256}$/.test(ref)) throw new InvalidInputError('not a WhatsApp media id');
  const info = (await graph.get('media', ref)) as Partial<MediaInfo>;
  if (typeof info.url !== 'string') throw new WhatsAppApiError('whatsapp media: the answer named no URL', { status: 502 });
  if (typeof info.file_size === 'number' && info.file_size > maxBytes) {
    throw new InvalidInputError(`attachment is ${info.file_size} bytes, more than ${maxBytes}`);
  }
  const file = await graph.download(info as MediaInfo, { maxBytes, label: `WhatsApp media ${ref}`, ...(signal && { signal }) });
  return info.mime_type && !file.mediaType ? { ...file, mediaType: info.mime_type } : file;
}

/** Adds `key` to a set kept to `max` entries, the oldest forgotten first. */
function remember(set: Set<string>, key: string, max: number): void {
  set.add(key);
  if (set.size > max) set.delete(set.values().next().value as string);
}
