/**
 * The LINE channel's outbound side: text replies and the loading animation,
 * over the SDK's `messagingApi.MessagingApiClient`. LINE cannot edit a
 * message, so the channel does not stream: a reply goes out whole when the
 * turn ends.
 *
 * A reply uses the conversation's newest reply token when it is still fresh
 * (`replyTokenTtlMs`; a token is single-use and lives about a minute, so it
 * is taken from Redis atomically) and a push message otherwise, or when
 * LINE refuses the token. A push carries `X-Line-Retry-Key`, a UUID made
 * from the delivery key, so a retried push LINE already accepted answers 409
 * and is not shown twice. A reply has no such key: when a runner dies after
 * LINE accepted a reply but before the outbox recorded it, the retry goes
 * out as a push and the user may see that one message twice.
 */
import { createHash } from 'node:crypto';
import { HTTPFetchError, type messagingApi } from '@line/bot-sdk';
import type { ChannelOutbound, MessageButton, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { InvalidInputError, type Logger, type RedisClient, type SignedFileStore, storage } from 'steerbot/plugin';
import { LineApiError, lineError } from './errors.js';
import { fileMessages } from './files.js';
import { replyTokenKey } from './keys.js';
import { lineAudio } from './m4a.js';

/** LINE's limit on a text message, in characters. */
export const LINE_MAX_MESSAGE_CHARS = 5000;
/** Limits of a quick reply: items, a label's characters, the text a tap sends. */
const MAX_QUICK_REPLIES = 13;
const QUICK_LABEL_MAX = 20;
const QUICK_TEXT_MAX = 300;
/** Most conversations whose last loading animation time is remembered (the oldest is forgotten first). */
const TYPING_MEMORY = 1000;

/** A group (`C…`) or room (`R…`) id: the loading animation is for one-to-one chats only. */
const GROUP_ID = /^[CR][0-9a-f]{32}$/;

const takeScript = storage.defineScript(new URL('./reply-token-take-1.lua', import.meta.url));

/** Parses `<channel id>:<chat id>` (`conversationIdOf`'s); throws InvalidInputError for any other conversation. */
export function recipientOf(channelId: string, conversationId: string): string {
  const prefix = `${channelId}:`;
  const id = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return id;
}

/** A UUID (version-5 shaped) made deterministically from `key`: the `X-Line-Retry-Key` of a push, the same on every retry. */
export function retryKeyOf(key: string): string {
  const h = createHash('sha256').update(key).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The text message of one part of a reply (delivery splits replies at `maxMessageChars` with `splitMessage`),
 * with quick replies for `buttons` (a tap sends the button's command).
 */
export function messageOf(text: string, buttons: readonly MessageButton[] | undefined): messagingApi.TextMessage {
  if (text.length > LINE_MAX_MESSAGE_CHARS) throw new InvalidInputError(`a LINE text message holds at most ${LINE_MAX_MESSAGE_CHARS} characters`);
  const message: messagingApi.TextMessage = { type: 'text', text };
  const usable = (buttons ?? []).filter((b) => b.command.length <= QUICK_TEXT_MAX).slice(0, MAX_QUICK_REPLIES);
  if (usable.length > 0) {
    message.quickReply = {
      items: usable.map((b) => ({ type: 'action', action: { type: 'message', label: b.label.slice(0, QUICK_LABEL_MAX), text: b.command } })),
    };
  }
  return message;
}

/** Options of `createLineOutbound`. */
export interface LineOutboundOptions {
  channelId: string;
  client: messagingApi.MessagingApiClient;
  /** The channel access token, removed from error messages. */
  accessToken: string;
  redis: RedisClient;
  prefix: string;
  /** How old a reply token may be and still be used, in ms (0: always push). */
  replyTokenTtlMs: number;
  /** Wait of a 429 that names no `Retry-After`, in ms. */
  rateLimitRetryMs: number;
  /** How long one loading animation shows, in seconds (a multiple of 5, 5 to 60). */
  loadingSeconds: number;
  logger: Logger;
  /** Where sent files are kept for LINE to fetch (`filesUrl` is set), and the largest one, in bytes. Default: none (a file becomes a text message). */
  files?: { store: SignedFileStore; maxBytes: number };
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The id of the last message a reply or push answer names. */
function sentId(answer: { sentMessages?: Array<{ id?: string }> }): string {
  const id = answer.sentMessages?.at(-1)?.id;
  if (typeof id !== 'string') throw new LineApiError('line send: the answer named no message id', { status: 502 });
  return id;
}

/** Builds the outbound side. Every method throws ChannelApiError (a LineApiError; 429: `retryAfterMs`). */
export function createLineOutbound(o: LineOutboundOptions): ChannelOutbound {
  const { client, channelId } = o;
  const now = o.now ?? Date.now;
  const lastTyping = new Map<string, number>();
  const fail = (what: string, err: unknown) => lineError(what, err, o.accessToken, o.rateLimitRetryMs);

  /** Takes the conversation's reply token (once: it is single-use, and is marked used) when it is fresh enough; undefined otherwise. */
  async function takeReplyToken(conversationId: string): Promise<string | undefined> {
    if (o.replyTokenTtlMs === 0) return undefined;
    const [stored] = await takeScript.run(o.redis, [replyTokenKey(o.prefix, conversationId)], []);
    if (typeof stored !== 'string') return undefined;
    const colon = stored.indexOf(':');
    if (colon < 0) return undefined;
    const at = Number(stored.slice(0, colon));
    return now() - at <= o.replyTokenTtlMs ? stored.slice(colon + 1) : undefined;
  }

  /** Sends one message: by reply token when `replyToken` is given and accepted, else by push. */
  async function sendOne(to: string, messages: messagingApi.Message[], replyToken: string | undefined, retryKey: string | undefined): Promise<string> {
    if (replyToken !== undefined) {
      let answer: Awaited<ReturnType<typeof client.replyMessage>> | undefined;
      try {
        answer = await client.replyMessage({ replyToken, messages });
      } catch (err) {
        const e = fail('reply', err);
        // 400: the token expired or was used (LINE says "Invalid reply token"); the message goes as a push.
        if (e.status !== 400) throw e;
        o.logger.info({ to, err: e.message }, 'line refused the reply token; pushing instead');
      }
      // Read outside the call's try: an answer LINE gave is never taken for a failed send (a retry would push it again).
      if (answer) return sentId(answer);
    }
    try {
      return sentId(await client.pushMessage({ to, messages }, retryKey));
    } catch (err) {
      // 409: a push with this retry key was accepted before (an earlier attempt of this delivery); not sent again.
      if (err instanceof HTTPFetchError && err.status === 409 && retryKey !== undefined) {
        return err.headers.get('x-line-accepted-request-id') ?? retryKey;
      }
      throw fail('push', err);
    }
  }

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: LINE_MAX_MESSAGE_CHARS,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const to = recipientOf(channelId, conversationId);
      // LINE shows text as written: markdown goes out unformatted.
      const message = messageOf(text, opts.buttons);
      const retryKey = opts.deliveryKey === undefined ? undefined : retryKeyOf(opts.deliveryKey);
      const messageId = await sendOne(to, [message], await takeReplyToken(conversationId), retryKey);
      // A message ends the loading animation: the next turn's typing shows it again.
      lastTyping.delete(conversationId);
      return { messageId };
    },

    async typing(conversationId: string) {
      const chatId = recipientOf(channelId, conversationId);
      if (GROUP_ID.test(chatId)) return;
      const at = now();
      // The animation shows for `loadingSeconds` (or until a message arrives): asked again at half that.
      if (at - (lastTyping.get(conversationId) ?? -Infinity) < (o.loadingSeconds * 1000) / 2) return;
      try {
        await client.showLoadingAnimation({ chatId, loadingSeconds: o.loadingSeconds });
      } catch (err) {
        throw fail('loading animation', err);
      }
      lastTyping.delete(conversationId);
      lastTyping.set(conversationId, at);
      if (lastTyping.size > TYPING_MEMORY) lastTyping.delete(lastTyping.keys().next().value as string);
    },
  };
  const files = o.files;
  if (!files) return outbound;
  // LINE takes media by HTTPS URL only: the file is kept for download, and the message names its signed URL.
  outbound.maxFileBytes = files.maxBytes;
  // LINE's audio message plays M4A: spoken replies are made as AAC, put in an M4A container when sent.
  outbound.voiceFormat = 'aac';
  outbound.sendFile = async (conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) => {
    const to = recipientOf(channelId, conversationId);
    const audio = await lineAudio(file);
    const sent = audio?.file ?? file;
    const kept = await files.store.keep(conversationId, sent, opts.deliveryKey);
    const retryKey = opts.deliveryKey === undefined ? undefined : retryKeyOf(opts.deliveryKey);
    const messageId = await sendOne(to, fileMessages(sent, kept.url, audio?.durationMs), await takeReplyToken(conversationId), retryKey);
    lastTyping.delete(conversationId);
    return { messageId };
  };
  return outbound;
}
