/**
 * The web chat's outbound side: every reply, streaming edit and typing
 * signal is appended to the conversation's event stream in Redis
 * (the core reply stream, `storeReply` / `replyStreamKey`, so purge and
 * retention cover it), which the page reads over server-sent events. A
 * runner process writes it; any host serves it. A reply is stored once per
 * delivery key: a retried run attempt that sends it again finds it stored.
 */
import { randomUUID } from 'node:crypto';
import type { ChannelOutbound, MessageButton, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { ChannelApiError, DEFAULT_DELIVERY_KEY_TTL_SECONDS, type RedisClient, type SignedFileStore, storage } from 'steerbot/plugin';
import type { WebConfig } from './config.js';

/** Channel id of the web chat; conversation ids are `web:<public id>` (`visitor-id.ts`). */
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
  /**
   * A file the agent sent, shown inline: `kind` `image` as an image, `audio` (a spoken reply among them) as an
   * audio player, `file` as a download link. `url`: same-origin, signed, expiring at `expiresAt` (ISO 8601).
   */
  | {
      type: 'file';
      id: string;
      kind: 'image' | 'audio' | 'file';
      name: string;
      mimeType: string;
      size: number;
      url: string;
      expiresAt: string;
      caption?: string;
      voice?: boolean;
    }
  | { type: 'typing' };

/** Options of the outbound side. */
export interface WebOutboundOptions {
  config: WebConfig;
  redis: RedisClient;
  prefix: string;
  /** Where sent files are kept for the page to show (served by the host at `/chat/files/…`). */
  files: SignedFileStore;
}

/** Image types every browser shows (no SVG: it may carry script). */
const INLINE_IMAGES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** How the page shows `file`. Pure. */
function kindOf(file: OutboundFile): 'image' | 'audio' | 'file' {
  if (INLINE_IMAGES.has(file.mimeType)) return 'image';
  if (file.voice || file.mimeType.startsWith('audio/')) return 'audio';
  return 'file';
}

export function createWebOutbound(o: WebOutboundOptions): ChannelOutbound {
  const check = (conversationId: string) => {
    if (!conversationId.startsWith(`${WEB_CHANNEL_ID}:`))
      throw new ChannelApiError(`conversation ${conversationId} is not on channel ${WEB_CHANNEL_ID}`, { status: 400 });
  };
  const store = async (conversationId: string, event: WebEvent, deliveryKey: string | undefined) => {
    await storage.storeReply(o.redis, conversationId, JSON.stringify(event), {
      prefix: o.prefix,
      maxLen: o.config.eventStreamMaxLen,
      ...(deliveryKey !== undefined && { deliveryKey }),
      dedupeSeconds: DEFAULT_DELIVERY_KEY_TTL_SECONDS,
    });
  };
  const append = async (conversationId: string, event: WebEvent) => {
    await o.redis.xadd(storage.replyStreamKey(o.prefix, conversationId), 'MAXLEN', '~', o.config.eventStreamMaxLen, '*', 'data', JSON.stringify(event));
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
      await store(conversationId, event, opts.deliveryKey);
      return { messageId: id };
    },
    maxFileBytes: o.config.maxFileBytes,
    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) {
      check(conversationId);
      const id = opts.deliveryKey ?? randomUUID();
      const kept = await o.files.keep(conversationId, file, id);
      const event: WebEvent = {
        type: 'file',
        id,
        kind: kindOf(file),
        name: file.name,
        mimeType: file.mimeType,
        size: kept.size,
        url: kept.url,
        expiresAt: kept.expiresAt.toISOString(),
        ...(file.caption && { caption: file.caption }),
        ...(file.voice && { voice: true }),
      };
      await store(conversationId, event, opts.deliveryKey);
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
