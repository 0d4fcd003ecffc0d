/**
 * Events → normalized inbound messages (pure). What a message says is read
 * by its type (`content.ts`: text, rich text, images, files, voice, video,
 * stickers). A message is addressed to the bot in a one-to-one chat always,
 * in a group only when it mentions the bot (a text or rich-text message; an
 * image, file, voice message, video or sticker cannot, so a group's are not
 * taken). Update key
 * `<channel id>:<message id>` (the same on every delivery of a message,
 * whatever its event id); conversation `<channel id>:<chat id>`, or
 * `<channel id>:<chat id>:<root message id>` in a thread. A card click
 * becomes its button's command, from the clicker.
 */
import type { InboundMessage } from 'steerbot/channel';
import { READ_TYPES, readBody } from './content.js';
import type { CardAction, MessageEvent } from './event-schema.js';

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

/** Turns one `im.message.receive_v1` into an inbound message, or says why it is skipped. */
export function normalizeMessage(
  channelId: string,
  e: MessageEvent,
  botOpenId: string | undefined,
): { kind: 'message'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason; problem?: string } {
  const senderId = e.sender.sender_id?.open_id;
  if (e.sender.sender_type !== 'user' || senderId === undefined) return { kind: 'skip', reason: 'from-a-bot' };
  if (!READ_TYPES.has(e.message.message_type)) return { kind: 'skip', reason: 'unsupported-type' };
  const group = e.message.chat_type !== 'p2p';
  if (group && !(e.message.mentions ?? []).some((m) => m.id?.open_id !== undefined && m.id.open_id === botOpenId))
    return { kind: 'skip', reason: 'not-addressed' };
  const body = readBody(e, botOpenId);
  if ('problem' in body) return { kind: 'skip', reason: 'unreadable', problem: body.problem };
  if (body.text === '' && !body.attachments?.length) return { kind: 'skip', reason: 'empty' };
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
