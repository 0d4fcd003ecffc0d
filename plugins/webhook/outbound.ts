/**
 * The webhook channel's outbound side. Every reply is appended, once per
 * delivery key, to the conversation's reply stream in Redis (read by the event stream and by the
 * callback pump, `callbacks.ts`); with a callback URL configured the
 * conversation is marked pending, and a host POSTs the reply there signed like
 * requests (`X-Steerbot-Timestamp`, `X-Steerbot-Signature`), retried with
 * backoff until the receiver answers 2xx. `send` is done once the reply is
 * stored: a receiver that is down does not hold up the run.
 */
import { randomUUID } from 'node:crypto';
import type { ChannelOutbound, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { ChannelApiError, fetchUrlFile, type RedisClient, type ResolveHost, type SignedFileStore, storage } from 'steerbot/plugin';
import { notifyPending } from './callbacks.js';
import type { WebhookChannelConfig } from './config.js';
import type { WebhookReply } from './events.js';

export interface WebhookOutboundOptions {
  channelId: string;
  config: WebhookChannelConfig;
  redis: RedisClient;
  prefix: string;
  /** DNS resolution of attachment hosts (tests point names at local servers). Default `node:dns`. */
  resolve?: ResolveHost;
  /** Where sent files are kept for download (the channel's `filesUrl` is set). Default: none (a file becomes a text reply). */
  files?: SignedFileStore;
}

/** Whether `ref` is an http(s) URL whose host (with its port when not the default) matches `hosts` (`*.example.com` matches subdomains). */
export function allowedAttachmentUrl(ref: string, hosts: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(ref);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  if (url.username || url.password) return false;
  return hosts.some((h) => {
    const pattern = h.toLowerCase();
    if (pattern.startsWith('*.')) return url.host.endsWith(pattern.slice(1)) && url.host.length > pattern.length - 1;
    return url.host === pattern;
  });
}

export function createWebhookOutbound(o: WebhookOutboundOptions): ChannelOutbound {
  const cfg = o.config;
  /** Stores `reply` once per delivery key and marks the conversation for its callback. */
  const store = async (conversationId: string, reply: WebhookReply, deliveryKey: string | undefined): Promise<{ messageId: string }> => {
    // The stream first, then the mark (two keys in two slots, so two commands): the pump never
    // finds a mark without its reply. A reply stored before (same delivery key: a retried run
    // attempt) is not stored again, but marked again, in case the crash came between the two.
    await storage.storeReply(o.redis, conversationId, JSON.stringify(reply), {
      prefix: o.prefix,
      maxLen: cfg.replyStreamMaxLen,
      ...(deliveryKey !== undefined && { deliveryKey }),
      dedupeSeconds: cfg.replyDedupeSeconds,
    });
    if (cfg.callbackUrl) await notifyPending(o.redis, o.prefix, o.channelId, conversationId);
    return { messageId: reply.messageId };
  };
  const conversationOf = (conversationId: string): string => {
    if (!conversationId.startsWith(`${o.channelId}:`))
      throw new ChannelApiError(`conversation ${conversationId} is not on channel ${o.channelId}`, { status: 400 });
    return conversationId.slice(o.channelId.length + 1);
  };
  const sendFile = async (conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) => {
    const messageId = opts.deliveryKey ?? randomUUID();
    const kept = await o.files!.keep(conversationId, file, messageId);
    const reply: WebhookReply = {
      conversation: conversationOf(conversationId),
      text: file.caption ?? '',
      messageId,
      file: {
        name: file.name,
        mimeType: file.mimeType,
        size: kept.size,
        url: kept.url,
        expiresAt: kept.expiresAt.toISOString(),
        ...(file.voice && { voice: true }),
      },
      ...(opts.replyTo !== undefined && { inReplyTo: opts.replyTo }),
    };
    return store(conversationId, reply, opts.deliveryKey);
  };
  return {
    channelId: o.channelId,
    maxMessageChars: cfg.maxMessageChars,
    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const reply: WebhookReply = {
        conversation: conversationOf(conversationId),
        text,
        messageId: opts.deliveryKey ?? randomUUID(),
        ...(opts.replyTo !== undefined && { inReplyTo: opts.replyTo }),
        ...(opts.buttons?.length && { actions: opts.buttons.map((b) => ({ label: b.label, command: b.command })) }),
      };
      return store(conversationId, reply, opts.deliveryKey);
    },
    // A file is kept for download only where the operator said where downloads are reached from.
    ...(o.files !== undefined && { sendFile, maxFileBytes: cfg.maxFileBytes }),
    async fetchAttachment(attachment, { maxBytes, signal }) {
      // Only hosts the operator allowed, at every redirect too, and only public addresses unless allowed: a client
      // could otherwise make the runner fetch any URL (internal ones included).
      return fetchUrlFile(attachment.ref, {
        maxBytes,
        ...(signal && { signal }),
        label: 'webhook attachment',
        allowUrl: (url) => allowedAttachmentUrl(url.href, cfg.attachmentHosts),
        allowPrivate: cfg.attachmentAllowPrivate,
        ...(o.resolve && { resolve: o.resolve }),
      });
    },
  };
}
