/**
 * Events → normalized inbound messages (pure). Text messages are read for
 * their text; image and file messages become an attachment by reference
 * (`resources.ts`), with no text. A message is addressed to the bot in a
 * one-to-one chat always, in a group only when it mentions the bot (an
 * image or a file cannot, so a group's are not taken). Update key
 * `<channel id>:<message id>` (the same on every delivery of a message,
 * whatever its event id); conversation `<channel id>:<chat id>`, or
 * `<channel id>:<chat id>:<root message id>` in a thread. A card click
 * becomes its button's command, from the clicker.
 */
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import type { CardAction, MessageEvent } from './event-schema.js';
import { kindOfMime, mimeOfName, resourceRef } from './resources.js';

/** The conversation of a chat (and thread): `parseConversation` reads it back. */
export const conversationIdOf = (channelId: string, chatId: string, rootId?: string): string =>
  rootId === undefined ? `${channelId}:${chatId}` : `${channelId}:${chatId}:${rootId}`;

/** The chat and thread root of a conversation of this channel; undefined for any other. */
export function parseConversation(channelId: string, conversationId: string): { chatId: string; rootId?: string } | undefined {
  const prefix = `${channelId}:`;
  if (!conversationId.startsWith(prefix)) return undefined;
  const [chatId, rootId, ...rest] = conversationId.slice(prefix.length).split(':');
  const ok = (s: string | undefined) => s !== undefined && /^[A-Za-z0-9_-]{1,128}$/.test(s);
  if (!ok(chatId) || rest.length > 0 || (rootId !== undefined && !ok(rootId))) return undefined;
  return { chatId: chatId as string, ...(rootId !== undefined && { rootId }) };
}

/** Why an event is not passed on. */
export type SkipReason = 'from-a-bot' | 'unsupported-type' | 'not-addressed' | 'empty' | 'unreadable';

/** The message's `content`, parsed; undefined when it is not a JSON object. */
function contentOf(e: MessageEvent): Record<string, unknown> | undefined {
  try {
    const content: unknown = JSON.parse(e.message.content);
    return typeof content === 'object' && content !== null && !Array.isArray(content) ? (content as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A text message's text, mentions of the bot removed and others shown as `@name`. */
function textOf(e: MessageEvent, botOpenId: string | undefined): string | undefined {
  const raw = contentOf(e)?.text;
  if (typeof raw !== 'string') return undefined;
  let text = raw;
  for (const m of e.message.mentions ?? []) text = text.split(m.key).join(m.id?.open_id === botOpenId ? '' : `@${m.name ?? 'someone'}`);
  return text.replace(/\s+/g, ' ').trim();
}

/** A file's name as the model may be shown it, in a placeholder line: control characters and line breaks become spaces; undefined when empty. */
function fileName(raw: unknown): string | undefined {
  const name =
    typeof raw === 'string'
      ? raw
          .replace(/[\p{Cc}\s]+/gu, ' ')
          .trim()
          .slice(0, 512)
      : '';
  return name === '' ? undefined : name;
}

/** The attachment of an image or file message; undefined when its key (or the message id) is off the grammar. */
function attachmentOf(e: MessageEvent): Attachment | undefined {
  const c = contentOf(e);
  const messageId = e.message.message_id;
  if (e.message.message_type === 'image') {
    const ref = typeof c?.image_key === 'string' ? resourceRef({ messageId, type: 'image', key: c.image_key }) : undefined;
    return ref === undefined ? undefined : { kind: 'image', ref };
  }
  const ref = typeof c?.file_key === 'string' ? resourceRef({ messageId, type: 'file', key: c.file_key }) : undefined;
  if (ref === undefined) return undefined;
  const name = fileName(c?.file_name);
  const mime = name === undefined ? undefined : mimeOfName(name);
  return { kind: kindOfMime(mime), ref, ...(name !== undefined && { name }), ...(mime !== undefined && { mime }) };
}

/** What a message says: its text, or its file as an attachment; undefined when unreadable. */
function bodyOf(e: MessageEvent, botOpenId: string | undefined): { text: string; attachments?: Attachment[] } | undefined {
  if (e.message.message_type === 'text') {
    const text = textOf(e, botOpenId);
    return text === undefined ? undefined : { text };
  }
  const attachment = attachmentOf(e);
  return attachment === undefined ? undefined : { text: '', attachments: [attachment] };
}

/** Message types read: text, and files by reference. */
const READ_TYPES = new Set(['text', 'image', 'file']);

/** Turns one `im.message.receive_v1` into an inbound message, or says why it is skipped. */
export function normalizeMessage(
  channelId: string,
  e: MessageEvent,
  botOpenId: string | undefined,
): { kind: 'message'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason } {
  const senderId = e.sender.sender_id?.open_id;
  if (e.sender.sender_type !== 'user' || senderId === undefined) return { kind: 'skip', reason: 'from-a-bot' };
  if (!READ_TYPES.has(e.message.message_type)) return { kind: 'skip', reason: 'unsupported-type' };
  const group = e.message.chat_type !== 'p2p';
  if (group && !(e.message.mentions ?? []).some((m) => m.id?.open_id !== undefined && m.id.open_id === botOpenId))
    return { kind: 'skip', reason: 'not-addressed' };
  const body = bodyOf(e, botOpenId);
  if (body === undefined) return { kind: 'skip', reason: 'unreadable' };
  if (body.text === '' && body.attachments === undefined) return { kind: 'skip', reason: 'empty' };
  const rootId = e.message.thread_id !== undefined ? e.message.root_id : undefined;
  const message: InboundMessage = {
    conversationId: conversationIdOf(channelId, e.message.chat_id, rootId),
    updateKey: `${channelId}:${e.message.message_id}`,
    chatId: e.message.chat_id,
    sender: { id: senderId },
    ...body,
    messageId: e.message.message_id,
    ...(group && { group: true }),
  };
  return { kind: 'message', message };
}

/** What our buttons carry in their `value`: the command, and where the card was sent. */
export interface ButtonValue {
  command: string;
  /** The thread root, when the card was sent in a thread. */
  root?: string;
}

/** Turns a click into the command message from the clicker, or undefined when it is not a click on one of our buttons. */
export function normalizeClick(channelId: string, a: CardAction): InboundMessage | undefined {
  const v = a.action.value ?? {};
  if (typeof v.command !== 'string' || !v.command.startsWith('/') || v.command.length > 2000) return undefined;
  const root = typeof v.root === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(v.root) ? v.root : undefined;
  const chatId = a.context.open_chat_id;
  return {
    conversationId: conversationIdOf(channelId, chatId, root),
    updateKey: `${channelId}:card:${a.event_id ?? `${a.context.open_message_id ?? ''}:${a.operator.open_id}:${v.command}`}`,
    chatId,
    sender: { id: a.operator.open_id, ...(a.operator.name !== undefined && { name: a.operator.name }) },
    text: v.command,
    interaction: 'button',
  };
}
