/**
 * LINE event → normalized inbound message (pure). Update key
 * `<channel id>:<webhookEventId>` (the same across redeliveries, so a
 * redelivered event is a duplicate); conversation `<channel id>:<userId>`
 * for a one-to-one chat, `<channel id>:<groupId>` or `<channel id>:<roomId>`
 * (with `group`) for a group or multi-person chat.
 */
import type { InboundMessage } from 'steerbot/channel';
import type { LineEvent } from './payload-schema.js';

/** The conversation of a LINE chat: `<channel id>:<chat id>` (`recipientOf` parses it back). */
export const conversationIdOf = (channelId: string, chatId: string): string => `${channelId}:${chatId}`;

/** Why an event is not passed on. */
export type SkipReason = 'not-a-message' | 'unsupported-type' | 'standby' | 'no-sender' | 'empty';

/** The chat an event came from: its id (where a push goes) and whether several people share it. */
export function chatOf(event: LineEvent): { chatId: string; group: boolean } | undefined {
  const s = event.source;
  if (s?.type === 'group' && s.groupId) return { chatId: s.groupId, group: true };
  if (s?.type === 'room' && s.roomId) return { chatId: s.roomId, group: true };
  if (s?.type === 'user' && s.userId) return { chatId: s.userId, group: false };
  return undefined;
}

/** Turns one event into an inbound message, or says why it is skipped. */
export function normalizeEvent(channelId: string, event: LineEvent): { kind: 'message'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason } {
  if (event.type !== 'message') return { kind: 'skip', reason: 'not-a-message' };
  // `standby`: another module has the chat; the bot must not answer.
  if (event.mode !== undefined && event.mode !== 'active') return { kind: 'skip', reason: 'standby' };
  if (event.message?.type !== 'text') return { kind: 'skip', reason: 'unsupported-type' };
  const chat = chatOf(event);
  const userId = event.source?.userId;
  if (!chat || !userId) return { kind: 'skip', reason: 'no-sender' };
  const text = event.message.text ?? '';
  if (text.trim() === '') return { kind: 'skip', reason: 'empty' };
  const message: InboundMessage = {
    conversationId: conversationIdOf(channelId, chat.chatId),
    updateKey: `${channelId}:${event.webhookEventId}`,
    chatId: chat.chatId,
    sender: { id: userId },
    text,
    ...(event.message.id !== undefined && { messageId: event.message.id }),
    ...(chat.group && { group: true }),
  };
  if (event.message.quotedMessageId !== undefined) message.replyTo = { messageId: event.message.quotedMessageId };
  return { kind: 'message', message };
}
