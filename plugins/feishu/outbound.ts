/**
 * The Feishu / Lark channel's outbound side: text messages, and interactive
 * cards when a message has buttons, over the SDK's client (`im.message.create`
 * to the chat, `im.message.reply` into a thread, with `reply_in_thread`).
 * The SDK gets and renews the tenant access token itself.
 *
 * Every send carries `uuid`, made from the delivery key: the platform sends
 * at most one message per uuid within an hour, so a takeover's resend of a
 * message whose outcome was never recorded is not shown twice. The platform
 * cannot show a typing indicator, and a text message is not edited here:
 * replies go out whole when the turn ends.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Client } from '@larksuiteoapi/node-sdk';
import type { ChannelOutbound, SendOptions } from 'steerbot/channel';
import { InvalidInputError } from 'steerbot/plugin';
import { buttonCard } from './card.js';
import { FeishuApiError, feishuError } from './errors.js';
import { parseConversation } from './normalize.js';

/**
 * Longest message, in characters. A text message's request may be 150 KB
 * and a card's 30 KB; 8000 UTF-16 units are at most 24 000 bytes of UTF-8,
 * so a part fits either with room for the card's structure.
 */
export const FEISHU_MAX_MESSAGE_CHARS = 8000;

/** The `uuid` of a send made from `key` (at most 50 characters, the same on every retry). */
export const uuidOf = (key: string): string => `sb-${createHash('sha256').update(key).digest('hex').slice(0, 40)}`;

/** Options of `createFeishuOutbound`. */
export interface FeishuOutboundOptions {
  channelId: string;
  client: Client;
  /** Wait of a rate limit that names none, in ms (for a 200 answer with a rate-limit code). */
  rateLimitRetryMs: number;
}

/** An SDK answer: `{ code, msg, data }`. */
type Answer = { code?: number | undefined; msg?: string | undefined; data?: { message_id?: string | undefined } | undefined };

/** The message id of a send's answer; a non-zero `code` is a FeishuApiError. */
function messageIdOf(what: string, answer: Answer, rateLimitRetryMs: number): string {
  if (answer.code !== undefined && answer.code !== 0) throw feishuError(what, 200, answer, new Headers(), [], rateLimitRetryMs);
  const id = answer.data?.message_id;
  if (typeof id !== 'string' || id === '') throw new FeishuApiError(`feishu ${what}: the answer named no message id`, { status: 502 });
  return id;
}

/** Builds the outbound side. Every method throws ChannelApiError (a FeishuApiError; rate limits: `retryAfterMs`). */
export function createFeishuOutbound(o: FeishuOutboundOptions): ChannelOutbound {
  const { client, channelId } = o;
  return {
    channelId,
    maxMessageChars: FEISHU_MAX_MESSAGE_CHARS,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const where = parseConversation(channelId, conversationId);
      if (!where) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
      if (text.length > FEISHU_MAX_MESSAGE_CHARS) throw new InvalidInputError(`a Feishu message holds at most ${FEISHU_MAX_MESSAGE_CHARS} characters here`);
      const buttons = opts.buttons ?? [];
      const [msgType, content] =
        buttons.length > 0
          ? (['interactive', JSON.stringify(buttonCard(text, buttons, { ...(where.rootId !== undefined && { root: where.rootId }) }))] as const)
          : (['text', JSON.stringify({ text })] as const);
      const uuid = uuidOf(opts.deliveryKey ?? randomUUID());
      // In a thread every message is a reply to its root; elsewhere a reply quotes the message it answers.
      const replyTo = where.rootId ?? opts.replyTo;
      if (replyTo !== undefined) {
        const answer = await client.im.message.reply({
          path: { message_id: replyTo },
          data: { msg_type: msgType, content, uuid, ...(where.rootId !== undefined && { reply_in_thread: true }) },
        });
        return { messageId: messageIdOf('reply', answer, o.rateLimitRetryMs) };
      }
      const answer = await client.im.message.create({
        params: { receive_id_type: 'chat_id' },
        data: { receive_id: where.chatId, msg_type: msgType, content, uuid },
      });
      return { messageId: messageIdOf('send', answer, o.rateLimitRetryMs) };
    },
  };
}
