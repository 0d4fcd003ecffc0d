/**
 * The Feishu / Lark channel's outbound side: text messages, interactive
 * cards when a message has buttons, images, files and voice (`files.ts`:
 * uploaded, then a message naming the key), over the SDK's client
 * (`im.message.create` to the chat, `im.message.reply` into a thread, with
 * `reply_in_thread`), and status reactions when configured
 * (`reactions.ts`). It also downloads the files people sent, for a
 * runner's prompt (`fetchAttachment`, `resources.ts`). The SDK gets and
 * renews the tenant access token itself.
 *
 * Every send carries `uuid`, made from the delivery key (a file's caption
 * from the key and `:caption`): the platform sends at most one message per
 * uuid within an hour, so a takeover's resend of a message whose outcome
 * was never recorded is not shown twice. The platform cannot show a typing
 * indicator, and a text message is not edited here: replies go out whole
 * when the turn ends.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Client } from '@larksuiteoapi/node-sdk';
import type { ChannelOutbound, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { InvalidInputError, type ReactionsSetting, type RedisClient } from 'steerbot/plugin';
import { buttonCard } from './card.js';
import { FeishuApiError, feishuError } from './errors.js';
import { FEISHU_FILE_MAX_BYTES, uploadFile } from './files.js';
import { parseConversation } from './normalize.js';
import { react } from './reactions.js';
import { downloadResource } from './resources.js';

/**
 * Longest message, in characters. A text message's request may be 150 KB
 * and a card's 30 KB; 8000 UTF-16 units are at most 24 000 bytes of UTF-8,
 * so a part fits either with room for the card's structure.
 */
export const FEISHU_MAX_MESSAGE_CHARS = 8000;

/** The `uuid` of a send made from `key` (at most 50 characters, the same on every retry). */
export const uuidOf = (key: string): string => `sb-${createHash('sha256').update(key).digest('hex').slice(0, 40)}`;

/**
 * `text` as a text message's content, mentioning nobody: the platform reads
 * `<at user_id="all"></at>` in one as a mention of everyone in the chat (and
 * `<at user_id="ou_…">` as one of that person), so a zero-width space after
 * each `<` that starts such a tag keeps it text, shown as written. A reply is
 * model output: text it read (a page, a group member's message) must not
 * notify a whole group.
 */
function textContent(text: string): string {
  return JSON.stringify({ text: text.replace(/<(?=\s*at\b)/gi, '<\u200B') });
}

/** Options of `createFeishuOutbound`. */
export interface FeishuOutboundOptions {
  channelId: string;
  client: Client;
  /** Wait of a rate limit that names none, in ms (for a 200 answer with a rate-limit code). */
  rateLimitRetryMs: number;
  /** Where the bot's reactions are kept (`reactions.ts`). */
  redis: RedisClient;
  /** Key prefix (config `redis.prefix`). */
  prefix: string;
  /** Status reactions on the person's messages; absent or false: none. */
  reactions?: ReactionsSetting;
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

/** Where a message goes: the chat, and the message it replies to (a thread's root: then in the thread). */
type Target = { chatId: string; rootId?: string; replyTo?: string };

/** Builds the outbound side. Every method throws ChannelApiError (a FeishuApiError; rate limits: `retryAfterMs`). */
export function createFeishuOutbound(o: FeishuOutboundOptions): ChannelOutbound {
  const { client, channelId } = o;

  /** The chat (and thread) of `conversationId`; InvalidInputError for another channel's. */
  function targetOf(conversationId: string, replyTo: string | undefined): Target {
    const where = parseConversation(channelId, conversationId);
    if (!where) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
    // In a thread every message is a reply to its root; elsewhere a reply quotes the message it answers.
    const to = where.rootId ?? replyTo;
    return { ...where, ...(to !== undefined && { replyTo: to }) };
  }

  /** Sends one message; returns its id. */
  async function post(t: Target, msgType: string, content: string, uuid: string): Promise<string> {
    if (t.replyTo !== undefined) {
      const answer = await client.im.message.reply({
        path: { message_id: t.replyTo },
        data: { msg_type: msgType, content, uuid, ...(t.rootId !== undefined && { reply_in_thread: true }) },
      });
      return messageIdOf('reply', answer, o.rateLimitRetryMs);
    }
    const answer = await client.im.message.create({
      params: { receive_id_type: 'chat_id' },
      data: { receive_id: t.chatId, msg_type: msgType, content, uuid },
    });
    return messageIdOf('send', answer, o.rateLimitRetryMs);
  }

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: FEISHU_MAX_MESSAGE_CHARS,
    maxFileBytes: FEISHU_FILE_MAX_BYTES,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const t = targetOf(conversationId, opts.replyTo);
      if (text.length > FEISHU_MAX_MESSAGE_CHARS) throw new InvalidInputError(`a Feishu message holds at most ${FEISHU_MAX_MESSAGE_CHARS} characters here`);
      const buttons = opts.buttons ?? [];
      const [msgType, content] =
        buttons.length > 0
          ? (['interactive', JSON.stringify(buttonCard(text, buttons, { ...(t.rootId !== undefined && { root: t.rootId }) }))] as const)
          : (['text', textContent(text)] as const);
      return { messageId: await post(t, msgType, content, uuidOf(opts.deliveryKey ?? randomUUID())) };
    },

    /**
     * Uploads the file and sends the message naming it, then its caption as
     * a text message; a retry uploads again (an unsent upload is not shown)
     * and the two messages' uuids keep either from showing twice.
     */
    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) {
      const t = targetOf(conversationId, opts.replyTo);
      const key = opts.deliveryKey ?? randomUUID();
      const { msgType, content } = await uploadFile(client, file);
      const messageId = await post(t, msgType, content, uuidOf(key));
      if (file.caption) await post(t, 'text', textContent(file.caption.slice(0, FEISHU_MAX_MESSAGE_CHARS)), uuidOf(`${key}:caption`));
      return { messageId };
    },

    fetchAttachment: (attachment, opts) => downloadResource(client, attachment, opts),
  };
  const reactions = o.reactions;
  if (reactions) outbound.react = (conversationId, messageId, status) => react(o, reactions, conversationId, messageId, status);
  return outbound;
}
