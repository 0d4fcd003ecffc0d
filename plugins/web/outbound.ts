/**
 * The web chat's outbound side: every reply, streaming edit and typing
 * signal is appended to the conversation's event stream in Redis
 * (the core reply stream, `storeReply` / `replyStreamKey`, so purge and
 * retention cover it), which the page reads over server-sent events. A
 * runner process writes it; any host serves it. A reply is stored once per
 * delivery key: a retried run attempt that sends it again finds it stored.
 */
import { randomUUID } from 'node:crypto';
import type { ChannelOutbound, MessageButton, SendOptions } from 'steerbot/channel';
import { ChannelApiError, DEFAULT_DELIVERY_KEY_TTL_SECONDS, type RedisClient, replyStreamKey, storeReply } from 'steerbot/plugin';
import type { WebConfig } from './config.js';

/** Channel id of the web chat; conversation ids are `web:<browser id>`. */
export const WEB_CHANNEL_ID = 'web';

/** One event of a conversation's stream, as the page receives it (`data` of an SSE event). */
export type WebEvent =
  /**
   * A reply. `id`: its delivery key (`<run id>:<answered seq>:<n>`) or a random id (command replies).
   * `buttons`: shown under it (a tool approval's Approve / Deny); a click sends the button's command as a message.
   */
  | { type: 'message'; id: string; text: string; replyTo?: string; buttons?: MessageButton[] }
  /** A streamed reply's text so far (replaces what `id` shows). */
  | { type: 'edit'; id: string; text: string }
  | { type: 'typing' };

/** Options of the outbound side. */
export interface WebOutboundOptions {
  config: WebConfig;
  redis: RedisClient;
  prefix: string;
}

export function createWebOutbound(o: WebOutboundOptions): ChannelOutbound {
  const check = (conversationId: string) => {
    if (!conversationId.startsWith(`${WEB_CHANNEL_ID}:`))
      throw new ChannelApiError(`conversation ${conversationId} is not on channel ${WEB_CHANNEL_ID}`, { status: 400 });
  };
  const append = async (conversationId: string, event: WebEvent) => {
    await o.redis.xadd(replyStreamKey(o.prefix, conversationId), 'MAXLEN', '~', o.config.eventStreamMaxLen, '*', 'data', JSON.stringify(event));
  };
  return {
    channelId: WEB_CHANNEL_ID,
    maxMessageChars: o.config.maxMessageChars,
    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      check(conversationId);
      const id = opts.deliveryKey ?? randomUUID();
      const event: WebEvent = {
        type: 'message',
        id,
        text,
        ...(opts.replyTo !== undefined && { replyTo: opts.replyTo }),
        ...(opts.buttons?.length && { buttons: opts.buttons.map((b) => ({ label: b.label, command: b.command })) }),
      };
      await storeReply(o.redis, conversationId, JSON.stringify(event), {
        prefix: o.prefix,
        maxLen: o.config.eventStreamMaxLen,
        ...(opts.deliveryKey !== undefined && { deliveryKey: opts.deliveryKey }),
        dedupeSeconds: DEFAULT_DELIVERY_KEY_TTL_SECONDS,
      });
      return { messageId: id };
    },
    async edit(conversationId: string, messageId: string, text: string) {
      check(conversationId);
      await append(conversationId, { type: 'edit', id: messageId, text });
    },
    async typing(conversationId: string) {
      check(conversationId);
      await append(conversationId, { type: 'typing' });
    },
    streamEditIntervalMs: () => o.config.streamEditIntervalMs,
  };
}
