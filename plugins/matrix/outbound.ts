/**
 * The Matrix channel's outbound side: `m.text` messages (Markdown rendered to
 * `formatted_body`, the plain `body` kept), replies, edits for streaming
 * (`m.replace`), files (`files-out.ts`), attachment downloads (`media.ts`),
 * typing, status reactions (`reactions.ts`) and who moderates a room (power
 * levels), over the client-server API.
 *
 * A message or file is sent with `PUT …/send/m.room.message/{txnId}` and the
 * delivery key as its transaction id: the homeserver answers a repeated
 * transaction id of the same access token with the event it already made,
 * so a takeover's resend of a message whose outcome was never recorded
 * (`maybeSentSince`) is not shown twice. Homeservers keep transaction ids
 * for a while only (Synapse: about 30 minutes), ample for a takeover. A
 * file's upload comes first and has no such id: an upload repeated by a
 * takeover leaves an unused media item on the homeserver, never a second
 * message. Buttons become a poll after the message (`polls.ts`): one
 * answer per button, a response the button's command.
 */
import { randomUUID } from 'node:crypto';
import type { ChannelOutbound, EditOptions, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { ChannelApiError, InvalidInputError, type Logger, type ReactionsSetting, type RedisClient } from 'steerbot/plugin';
import { type MatrixClient, seg } from './client.js';
import { MatrixApiError } from './errors.js';
import { fileContent } from './files-out.js';
import { markdownToMatrixHtml } from './markdown.js';
import { downloadMedia, UploadLimit } from './media.js';
import { roomOf, threadOf } from './normalize.js';
import { sendPoll } from './polls.js';
import { react } from './reactions.js';
import { sendEvent, txnIdOf } from './send.js';

/**
 * Longest message, in characters. An event may be at most 65 536 bytes of
 * JSON, envelope and signatures included; 16 000 characters of text are at
 * most 48 000 bytes of UTF-8 (3 bytes per UTF-16 unit), and an edit carries
 * the new text once in full (its fallback `body` is cut short).
 */
export const MATRIX_MAX_MESSAGE_CHARS = 16_000;
/** Longest fallback `body` of an edit (clients that do not apply edits show it), in characters. */
const EDIT_FALLBACK_CHARS = 1000;
/** How long one typing notification shows unless renewed, in ms: delivery renews it every few seconds while a run works, and it ends soon after. */
const TYPING_TIMEOUT_MS = 10_000;

/** Options of `createMatrixOutbound`. */
export interface MatrixOutboundOptions {
  channelId: string;
  client: MatrixClient;
  /** The bot's user id (typing is shown as it). */
  selfId: string;
  redis: RedisClient;
  prefix: string;
  /** Least time between streaming edits, in ms; absent: no streaming. */
  streamEditIntervalMs?: number;
  /** Status reactions on the person's messages; absent or false: none. */
  reactions?: ReactionsSetting;
  /** Let clients preview the links in the bot's messages (`linkPreviews`). Default false. */
  linkPreviews?: boolean;
  /** Largest file sent until the homeserver names its own limit, in bytes. */
  maxFileBytes: number;
  /** Timeout of one upload or download, in ms. */
  mediaTimeoutMs: number;
  logger: Logger;
}

/** Most delivery keys whose upload is remembered while their send is retried. */
const UPLOAD_MEMORY = 256;

/** Largest event content sent with its `formatted_body`, in bytes of JSON (an event holds at most 65 536 with its envelope); past it the plain text goes alone. */
const FORMATTED_MAX_BYTES = 60_000;

/**
 * What a message says of its link previews: none (an empty MSC4095 bundle, which clients that read it take as
 * "show no preview", asking their homeserver for none) unless the operator turned them on. A homeserver fetches
 * what it previews as a client shows the message, so a link the model wrote would carry what it holds to that
 * site with nobody clicking.
 */
const previewsOf = (linkPreviews: boolean | undefined): Record<string, unknown> => (linkPreviews ? {} : { 'com.beeper.linkpreviews': [] });

/**
 * `m.text` content of `text`: with the Markdown rendered as `formatted_body` when `format` asks and it fits;
 * mentioning nobody (an edit's `m.new_content` too) and without link previews unless `linkPreviews`.
 */
function textContent(text: string, format: EditOptions['format'], linkPreviews: boolean | undefined): Record<string, unknown> {
  const content: Record<string, unknown> = { msgtype: 'm.text', body: text, 'm.mentions': {}, ...previewsOf(linkPreviews) };
  if (format !== 'markdown') return content;
  const formatted = { ...content, format: 'org.matrix.custom.html', formatted_body: markdownToMatrixHtml(text) };
  return Buffer.byteLength(JSON.stringify(formatted)) <= FORMATTED_MAX_BYTES ? formatted : content;
}

/**
 * `m.relates_to` of a message: in a thread's conversation, the thread
 * (`m.thread`, with the reply fallback clients without threads show);
 * elsewhere a reply to `replyTo`; none without either.
 */
function threadRelation(threadRoot: string | undefined, replyTo: string | undefined): Record<string, unknown> | undefined {
  if (threadRoot !== undefined)
    return { rel_type: 'm.thread', event_id: threadRoot, is_falling_back: replyTo === undefined, 'm.in_reply_to': { event_id: replyTo ?? threadRoot } };
  return replyTo === undefined ? undefined : { 'm.in_reply_to': { event_id: replyTo } };
}

/** The room of a conversation; throws InvalidInputError for one that is not this channel's. */
function roomIdOf(channelId: string, conversationId: string): string {
  const roomId = roomOf(channelId, conversationId);
  if (roomId === undefined) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return roomId;
}

function checkLength(text: string): void {
  if (text.length > MATRIX_MAX_MESSAGE_CHARS) throw new InvalidInputError(`a Matrix message holds at most ${MATRIX_MAX_MESSAGE_CHARS} characters here`);
}

/**
 * Whether `userId` moderates the room by its `m.room.power_levels` content:
 * a power level (`users`, else `users_default`, else 0) at least the one
 * that redacts other people's messages (`redact`, default 50), as Discord's
 * Manage Messages counts there.
 */
export function isModerator(powerLevels: Record<string, unknown>, userId: string): boolean {
  const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
  const users = typeof powerLevels.users === 'object' && powerLevels.users !== null ? (powerLevels.users as Record<string, unknown>) : {};
  return num(users[userId], num(powerLevels.users_default, 0)) >= num(powerLevels.redact, 50);
}

/** `send`: one `m.text` message (in its thread, or a reply), then the poll of its buttons, if any. */
async function sendText(o: MatrixOutboundOptions, conversationId: string, text: string, opts: SendOptions): Promise<{ messageId: string }> {
  const roomId = roomIdOf(o.channelId, conversationId);
  checkLength(text);
  const content = textContent(text, opts.format, o.linkPreviews);
  const threadRoot = threadOf(o.channelId, conversationId);
  const relation = threadRelation(threadRoot, opts.replyTo);
  if (relation) content['m.relates_to'] = relation;
  const key = opts.deliveryKey;
  const messageId = await sendEvent(o.client, roomId, 'm.room.message', key === undefined ? randomUUID() : txnIdOf(key), content);
  if (opts.buttons?.length) {
    // In a thread the poll goes in the thread too; elsewhere it follows the message.
    const txnId = key === undefined ? randomUUID() : txnIdOf(`${key}:poll`);
    const pollRelation = threadRoot === undefined ? undefined : threadRelation(threadRoot, undefined);
    try {
      await sendPoll(o, { roomId, conversationId, text, buttons: opts.buttons, txnId, relation: pollRelation });
    } catch (err) {
      // The text, with its typed commands, is in the room: a poll the room refuses (power levels, a client
      // error) does not make the message a failure. A 429, a 5xx or Redis down is retried: both sends are keyed.
      if (!(err instanceof ChannelApiError) || err.status === undefined || err.status === 429 || err.status >= 500) throw err;
      o.logger.warn({ err, roomId }, 'poll not sent; the question stands as text');
    }
  }
  return { messageId };
}

/** Builds the outbound side. Every method throws ChannelApiError (a MatrixApiError; 429: `retryAfterMs`). */
export function createMatrixOutbound(o: MatrixOutboundOptions): ChannelOutbound {
  const { client, channelId } = o;
  const limit = new UploadLimit(client, o.maxFileBytes, o.logger);
  // Uploads whose send has not gone through yet, by delivery key: a retried send (a 429) names the same media.
  const uploaded = new Map<string, string>();

  const outbound: ChannelOutbound = {
    channelId,
    maxMessageChars: MATRIX_MAX_MESSAGE_CHARS,

    send: (conversationId: string, text: string, opts: SendOptions = {}) => sendText(o, conversationId, text, opts),

    async sendFile(conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) {
      const roomId = roomIdOf(channelId, conversationId);
      const key = opts.deliveryKey;
      let mxc = key === undefined ? undefined : uploaded.get(key);
      if (mxc === undefined) {
        mxc = await client.upload(file.bytes, file.mimeType, file.name, { timeoutMs: o.mediaTimeoutMs }).catch((err: unknown) => {
          // The homeserver's limit is lower than the one known: learn it now, for the next file.
          if (err instanceof MatrixApiError && err.status === 413) void limit.refresh();
          throw err;
        });
        if (key !== undefined) uploaded.set(key, mxc);
        if (uploaded.size > UPLOAD_MEMORY) uploaded.delete(uploaded.keys().next().value as string);
      }
      const txnId = key === undefined ? randomUUID() : txnIdOf(key);
      // A caption is the model's text too: no previews of its links.
      const content = { ...fileContent(file, mxc), ...previewsOf(o.linkPreviews) };
      const relation = threadRelation(threadOf(channelId, conversationId), opts.replyTo);
      if (relation) content['m.relates_to'] = relation;
      const messageId = await sendEvent(client, roomId, 'm.room.message', txnId, content);
      if (key !== undefined) uploaded.delete(key);
      return { messageId };
    },

    /** The homeserver's `m.upload.size` once asked (when a run starts typing, at most hourly), else the configured `maxFileBytes`. */
    get maxFileBytes() {
      return limit.bytes();
    },

    async fetchAttachment(attachment, { maxBytes, signal }) {
      return downloadMedia(client, attachment, { maxBytes, timeoutMs: o.mediaTimeoutMs, ...(signal && { signal }) });
    },

    async edit(conversationId: string, messageId: string, text: string, opts: EditOptions = {}) {
      const roomId = roomIdOf(channelId, conversationId);
      checkLength(text);
      const fallback = text.length > EDIT_FALLBACK_CHARS ? `${text.slice(0, EDIT_FALLBACK_CHARS)}…` : text;
      await sendEvent(client, roomId, 'm.room.message', randomUUID(), {
        msgtype: 'm.text',
        body: `* ${fallback}`,
        ...previewsOf(o.linkPreviews),
        'm.new_content': textContent(text, opts.format, o.linkPreviews),
        'm.relates_to': { rel_type: 'm.replace', event_id: messageId },
      });
    },

    async isAdmin(conversationId: string, userId: string) {
      const roomId = roomIdOf(channelId, conversationId);
      return isModerator(await client.call('power levels', 'GET', `rooms/${seg(roomId)}/state/m.room.power_levels`), userId);
    },

    async typing(conversationId: string) {
      const roomId = roomIdOf(channelId, conversationId);
      limit.bytes(); // a run starts: the upload limit is asked, if not within the hour, before a file may come
      await client.call('typing', 'PUT', `rooms/${seg(roomId)}/typing/${seg(o.selfId)}`, { body: { typing: true, timeout: TYPING_TIMEOUT_MS } });
    },
  };
  if (o.streamEditIntervalMs !== undefined) {
    const interval = o.streamEditIntervalMs;
    outbound.streamEditIntervalMs = () => interval;
  }
  const reactions = o.reactions;
  if (reactions)
    outbound.react = (conversationId, messageId, status) => react(o, reactions, roomIdOf(channelId, conversationId), conversationId, messageId, status);
  return outbound;
}
