/**
 * The Discord channel's outbound side: plain REST calls through
 * @discordjs/rest, which keeps the per-route rate-limit buckets and waits out
 * short 429s itself. Works without the gateway (a runner-only process sends
 * through it too).
 */
import { createHash, randomBytes } from 'node:crypto';
import { DiscordAPIError, HTTPError, MessageFlags, type RateLimitData, RateLimitError, REST, Routes } from 'discord.js';
import type { ChannelOutbound, EditOptions, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { ChannelApiError, fetchUrlFile, InvalidInputError, redactSecrets, staleReactions } from 'steerbot/plugin';
import { isGuildAdmin } from './admins.js';
import type { DiscordConfig } from './config.js';

/** Discord's limit on a message's `content`, in characters. */
export const DISCORD_MAX_MESSAGE_CHARS = 2000;

/**
 * Largest file a bot uploads, in bytes: 25 MiB, the limit of a server
 * without boosts when this was written (Discord answers 413 for more, and
 * delivery reports the file failed).
 */
export const DISCORD_MAX_FILE_BYTES = 25 * 1024 * 1024;

/**
 * Least time between two streaming edits of one message. Discord allows
 * about 5 message writes per 5 s per channel; 1.5 s leaves room for the
 * sends and typing calls of the same run.
 */
export const DISCORD_STREAM_EDIT_INTERVAL_MS = 1500;

/** Creates the REST client both sides use (the gateway client has its own for `/gateway/bot`). */
export function createRest(config: DiscordConfig, fetchImpl?: typeof fetch): REST {
  const rest = new REST({
    api: config.apiBase,
    // Short waits are handled here; a long one fails the call so delivery can reschedule it.
    rejectOnRateLimit: (data: RateLimitData) => Math.max(data.retryAfter, data.timeToReset) > config.maxRateLimitWaitMs,
    ...(fetchImpl && { makeRequest: fetchImpl as unknown as REST['options']['makeRequest'] }),
  });
  rest.setToken(config.token);
  return rest;
}

/** The platform chat (channel) id of a conversation id of this channel. */
export function channelIdOf(channelId: string, conversationId: string): string {
  const prefix = `${channelId}:`;
  const rest = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  if (!/^\d{1,25}$/.test(rest)) throw new InvalidInputError(`not a ${channelId} conversation id: ${conversationId}`);
  return rest;
}

const DISCORD_FILE_HOSTS = new Set(['cdn.discordapp.com', 'media.discordapp.net']);

/** Whether `ref` is a file URL on Discord's CDN, or on the origin of the configured API base. */
function isDiscordFileUrl(ref: string, apiBase: string): boolean {
  let url: URL;
  try {
    url = new URL(ref);
  } catch {
    return false;
  }
  return (url.protocol === 'https:' && DISCORD_FILE_HOSTS.has(url.hostname)) || url.origin === new URL(apiBase).origin;
}

/** Model output must never ping @everyone, roles or users; the person answered is pinged by the reply itself. */
const NO_PINGS = { parse: [], replied_user: true };

/**
 * The flags of every message the bot sends or edits: no link embeds unless
 * the operator turned previews on (`linkPreviews`). Discord fetches a link
 * to embed it at once, so a link the model wrote would carry what it holds
 * to that site with nobody clicking.
 */
export const embedFlags = (linkPreviews: boolean): { flags?: number } => (linkPreviews ? {} : { flags: MessageFlags.SuppressEmbeds });

/** The create-message body: no pings but the replied user, no embeds unless `linkPreviews`, buttons as one action row, the delivery key as an enforced nonce. */
function messageBody(channel: string, text: string, opts: SendOptions, linkPreviews: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { content: text, allowed_mentions: NO_PINGS, ...embedFlags(linkPreviews) };
  if (opts.replyTo) body.message_reference = { message_id: opts.replyTo, channel_id: channel, fail_if_not_exists: false };
  if (opts.buttons?.length) {
    // One action row; a click comes back as an interaction whose custom id is the command.
    body.components = [
      {
        type: 1,
        components: opts.buttons
          .slice(0, 5)
          .map((b, i) => ({ type: 2, style: i === 0 ? 1 : 2, label: b.label.slice(0, 80), custom_id: b.command.slice(0, 100) })),
      },
    ];
  }
  if (opts.deliveryKey) {
    // Discord returns the message already created with this nonce (for a few minutes) instead of
    // posting it again, so a retry after a lost response (ours or @discordjs/rest's) cannot duplicate it.
    body.nonce = nonceOf(opts.deliveryKey);
    body.enforce_nonce = true;
  }
  return body;
}

/** A file name as a multipart header can carry it (quotes, backslashes and line breaks replaced). */
const partName = (name: string) => name.replace(/["\\\r\n]/g, '_');

/** The create-message body of a file: its caption as content, one attachment, no pings, no embeds of the caption's links unless `linkPreviews`, the delivery key as an enforced nonce. */
function fileBody(channel: string, file: OutboundFile, opts: SendFileOptions, linkPreviews: boolean): Record<string, unknown> {
  const { content: _, ...body } = messageBody(
    channel,
    '',
    { ...(opts.replyTo && { replyTo: opts.replyTo }), ...(opts.deliveryKey && { deliveryKey: opts.deliveryKey }) },
    linkPreviews,
  );
  return {
    ...body,
    ...(file.caption && { content: file.caption.slice(0, DISCORD_MAX_MESSAGE_CHARS) }),
    attachments: [{ id: 0, filename: partName(file.name) }],
  };
}

/**
 * A create-message request with one file, as multipart bytes (`payload_json`, then `files[0]`), built here
 * rather than through the REST client's `files`: that path hands undici a FormData that its request function
 * refuses when the process holds two copies of undici (discord.js carries its own).
 */
function multipartMessage(body: Record<string, unknown>, file: OutboundFile): { body: Buffer; contentType: string } {
  const boundary = `steerbot-${randomBytes(16).toString('hex')}`;
  const part = (headers: string, data: Buffer) => Buffer.concat([Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), data, Buffer.from('\r\n')]);
  const name = partName(file.name);
  return {
    body: Buffer.concat([
      part('Content-Disposition: form-data; name="payload_json"\r\nContent-Type: application/json', Buffer.from(JSON.stringify(body))),
      part(`Content-Disposition: form-data; name="files[0]"; filename="${name}"\r\nContent-Type: ${file.mimeType}`, Buffer.from(file.bytes)),
      Buffer.from(`--${boundary}--\r\n`),
    ]),
    contentType: `multipart/form-data; boundary=${boundary}`,
  };
}

/** Builds the outbound side over `rest`. */
export function createDiscordOutbound(channelId: string, config: DiscordConfig, rest: REST): ChannelOutbound {
  const call = async <T>(what: string, fn: () => Promise<unknown>): Promise<T> => {
    try {
      return (await fn()) as T;
    } catch (err) {
      throw toChannelApiError(what, err, config.token);
    }
  };
  const checkText = (text: string): void => {
    // Delivery splits replies at maxMessageChars; anything longer reaching here is a bug upstream.
    if (text.length === 0) throw new InvalidInputError('discord: message text is empty');
    if (text.length > DISCORD_MAX_MESSAGE_CHARS) {
      throw new InvalidInputError(`discord: message is ${text.length} characters, the limit is ${DISCORD_MAX_MESSAGE_CHARS} (delivery splits longer replies)`);
    }
  };

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: DISCORD_MAX_MESSAGE_CHARS,

    async fetchAttachment(attachment, { maxBytes, signal }) {
      if (attachment.size !== undefined && attachment.size > maxBytes)
        throw new InvalidInputError(`attachment is ${attachment.size} bytes, more than ${maxBytes}`);
      // Only Discord's own file hosts (or the configured API's, a fake in tests), at every redirect too: a ref is
      // fetched, never an arbitrary URL. The configured API host is the operator's and may be private (a proxy).
      if (!isDiscordFileUrl(attachment.ref, config.apiBase)) throw new InvalidInputError('attachment is not on a Discord file host');
      return fetchUrlFile(attachment.ref, {
        maxBytes,
        ...(signal && { signal }),
        label: 'Discord attachment',
        allowUrl: (url) => isDiscordFileUrl(url.href, config.apiBase),
        allowPrivate: [new URL(config.apiBase).hostname.replace(/^\[|\]$/g, '')],
      });
    },

    async send(conversationId: string, text: string, opts: SendOptions = {}): Promise<{ messageId: string }> {
      const channel = channelIdOf(channelId, conversationId);
      checkText(text);
      const body = messageBody(channel, text, opts, config.linkPreviews);
      const sent = await call<{ id: string }>('send', () => rest.post(Routes.channelMessages(channel), { body }));
      return { messageId: sent.id };
    },

    // A message with the file attached (multipart, `files[0]`): Discord shows an image inline, anything else as a download.
    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}): Promise<{ messageId: string }> {
      const channel = channelIdOf(channelId, conversationId);
      const request = multipartMessage(fileBody(channel, file, opts, config.linkPreviews), file);
      const sent = await call<{ id: string }>('sendFile', () =>
        rest.post(Routes.channelMessages(channel), { body: request.body, passThroughBody: true, headers: { 'Content-Type': request.contentType } }),
      );
      return { messageId: sent.id };
    },
    maxFileBytes: DISCORD_MAX_FILE_BYTES,

    // Discord renders Markdown in `content` itself: `markdown` and `plain` send the same text.
    async edit(conversationId: string, messageId: string, text: string, _opts?: EditOptions): Promise<void> {
      const channel = channelIdOf(channelId, conversationId);
      checkText(text);
      // An edit's text is the model's too: the same pings and embeds as a send.
      const body = { content: text, allowed_mentions: NO_PINGS, ...embedFlags(config.linkPreviews) };
      await call('edit', () => rest.patch(Routes.channelMessage(channel, messageId), { body }));
    },

    async typing(conversationId: string): Promise<void> {
      const channel = channelIdOf(channelId, conversationId);
      await call('typing', () => rest.post(Routes.channelTyping(channel)));
    },

    isAdmin: (conversationId: string, userId: string) => isGuildAdmin(rest, channelIdOf(channelId, conversationId), userId, call),
  };
  const reactions = config.reactions;
  if (reactions) {
    outbound.react = async (conversationId, messageId, status) => {
      const channel = channelIdOf(channelId, conversationId);
      // Discord keeps every reaction: an answer or a failure takes the bot's other status reactions off (a failed
      // message a follow-up run answers shows ✅ alone). Removing one that is not there changes nothing.
      const stale = staleReactions(reactions, status);
      await Promise.all(
        stale.map((emoji) => call('react', () => rest.delete(Routes.channelMessageOwnReaction(channel, messageId, encodeURIComponent(emoji))))),
      );
      await call('react', () => rest.put(Routes.channelMessageOwnReaction(channel, messageId, encodeURIComponent(reactions[status]))));
    };
  }
  if (config.streaming) outbound.streamEditIntervalMs = () => DISCORD_STREAM_EDIT_INTERVAL_MS;
  return outbound;
}

/** Discord's `nonce` for a delivery key: at most 25 characters, so a hash of the key. */
export function nonceOf(deliveryKey: string): string {
  return createHash('sha256').update(deliveryKey).digest('hex').slice(0, 25);
}

/** Maps a @discordjs/rest failure to ChannelApiError; the token never survives into the message. */
export function toChannelApiError(what: string, err: unknown, token: string): ChannelApiError {
  if (err instanceof ChannelApiError) return err;
  if (err instanceof RateLimitError) {
    const retryAfterMs = Math.ceil(Math.max(err.retryAfter, err.timeToReset));
    return new ChannelApiError(
      redactSecrets(`discord ${what}: rate limited on ${err.method.toUpperCase()} ${err.route} (retry after ${retryAfterMs} ms)`, token),
      {
        status: 429,
        retryAfterMs,
      },
    );
  }
  if (err instanceof DiscordAPIError) {
    return new ChannelApiError(
      redactSecrets(`discord ${what}: ${err.status} ${err.method.toUpperCase()} ${pathOf(err.url)}: ${err.message} (code ${err.code})`, token),
      {
        status: err.status,
      },
    );
  }
  if (err instanceof HTTPError) {
    return new ChannelApiError(redactSecrets(`discord ${what}: ${err.status} ${err.method.toUpperCase()} ${pathOf(err.url)}: ${err.message}`, token), {
      status: err.status,
    });
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  // The cause is dropped on purpose: its fields (request options) could carry the token.
  return new ChannelApiError(redactSecrets(`discord ${what}: ${message}`, token));
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}
