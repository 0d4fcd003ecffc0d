/**
 * The Teams channel's outbound side: messages, edits and typing, posted to
 * the conversation at its service URL with the Agents SDK's
 * `ConnectorClient` (the Bot Connector REST API) and the bot's token. The
 * service URL is the conversation reference the inbound side kept (so the
 * send API and schedules reach a conversation the way a reply does), else
 * the configured `serviceUrl`; either must pass the allow-list.
 *
 * Buttons are an Adaptive Card whose `Action.Submit` data carries the
 * command; a click comes back as an activity with that `value`. Files (with
 * `filesUrl`) are kept for signed download and sent as an inline image or a
 * card with a link (`files.ts`). The Bot Connector has no idempotency key:
 * when a runner dies after Teams accepted a message or file but before the
 * outbox recorded it, a takeover may show that one message twice.
 */
import { ConnectorClient } from '@microsoft/agents-hosting';
import type { ChannelOutbound, MessageButton, OutboundFile, SendFileOptions, SendOptions } from 'steerbot/channel';
import { type RedisClient, type SignedFileStore, storage } from 'steerbot/plugin';
import type { ServiceUrlPolicy } from './auth.js';
import { ADAPTIVE_CARD, adaptiveCard, textElements } from './cards.js';
import { TeamsApiError, TeamsServiceUrlError, teamsError } from './errors.js';
import { fileActivity } from './files.js';
import { referenceKey } from './keys.js';
import { COMMAND_FIELD, teamsConversationOf } from './normalize.js';
import type { TokenSource } from './token.js';

/**
 * Most characters of one message: Teams takes about 28 KB per activity, and
 * 6000 UTF-16 units are at most 18 000 bytes of UTF-8, leaving room for the
 * JSON around the text (escapes, a card).
 */
export const TEAMS_MAX_MESSAGE_CHARS = 6000;
/** Most buttons of one card (Teams shows at most 6 actions in a row; the rest overflow). */
const MAX_BUTTONS = 20;

type Activity = Parameters<ConnectorClient['sendToConversation']>[1];

/** The activity of one message: plain or Markdown text, or an Adaptive Card with the text (`textElements`) and one `Action.Submit` per button. */
export function messageActivity(text: string, buttons: readonly MessageButton[] | undefined, format: SendOptions['format']): Record<string, unknown> {
  const textFormat = format === 'plain' ? 'plain' : 'markdown';
  if (!buttons?.length) return { type: 'message', text, textFormat };
  const actions = buttons.slice(0, MAX_BUTTONS).map((b) => ({ type: 'Action.Submit', title: b.label.slice(0, 80), data: { [COMMAND_FIELD]: b.command } }));
  const card = adaptiveCard(textElements(text), actions);
  return { type: 'message', summary: text.slice(0, 200), attachments: [{ contentType: ADAPTIVE_CARD, content: card }] };
}

/** Options of `createTeamsOutbound`. */
export interface TeamsOutboundOptions {
  channelId: string;
  redis: RedisClient;
  prefix: string;
  tokens: TokenSource;
  policy: ServiceUrlPolicy;
  /** Service URL of a conversation with no stored reference. */
  defaultServiceUrl: string;
  /** Wait of a 429 that names no `Retry-After`, in ms. */
  rateLimitRetryMs: number;
  /** Removed from error messages. */
  secrets: string[];
  /** Where sent files are kept for download (`filesUrl` is set), and the largest one, in bytes. Default: none (a file becomes a text message). */
  files?: { store: SignedFileStore; maxBytes: number };
}

/** Builds the outbound side. Every method throws ChannelApiError (a TeamsApiError; 429: `retryAfterMs`). */
export function createTeamsOutbound(o: TeamsOutboundOptions): ChannelOutbound {
  /** The conversation's Teams id and a connector client at its service URL. */
  async function connect(conversationId: string): Promise<{ id: string; client: ConnectorClient }> {
    const id = teamsConversationOf(o.channelId, conversationId);
    const stored = await storage.redisCall(() => o.redis.get(referenceKey(o.prefix, conversationId)));
    const serviceUrl = stored ?? o.defaultServiceUrl;
    if (!o.policy.allows(serviceUrl)) throw new TeamsServiceUrlError(`teams: service URL host not allowed: ${new URL(serviceUrl).host}`, { status: 403 });
    return { id: encodeURIComponent(id), client: ConnectorClient.createClientWithToken(serviceUrl, await o.tokens.get()) };
  }

  /** Runs one connector call; a refused token is forgotten, so the retry gets a new one. */
  async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const e = teamsError(what, err, o.rateLimitRetryMs, o.secrets);
      if (e.status === 401) o.tokens.forget();
      throw e;
    }
  }

  const idOf = (answer: { id?: unknown } | undefined, what: string): string => {
    if (typeof answer?.id !== 'string' || answer.id === '') throw new TeamsApiError(`teams ${what}: the answer named no activity id`, { status: 502 });
    return answer.id;
  };

  const outbound: ChannelOutbound = {
    channelId: o.channelId,
    maxMessageChars: TEAMS_MAX_MESSAGE_CHARS,

    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      const { id, client } = await connect(conversationId);
      const activity = messageActivity(text, opts.buttons, opts.format);
      const answer = await call('send', () => client.sendToConversation(id, activity as unknown as Activity));
      return { messageId: idOf(answer, 'send') };
    },

    async edit(conversationId: string, messageId: string, text: string, opts = {}) {
      const { id, client } = await connect(conversationId);
      // `attachments: []`: an update replaces the whole activity, so a card with buttons becomes plain text.
      const activity = { ...messageActivity(text, undefined, opts.format), attachments: [], id: messageId };
      await call('update', () => client.updateActivity(id, encodeURIComponent(messageId), activity as unknown as Activity));
    },

    async typing(conversationId: string) {
      const { id, client } = await connect(conversationId);
      await call('typing', () => client.sendToConversation(id, { type: 'typing' } as unknown as Activity));
    },
  };
  const files = o.files;
  if (!files) return outbound;
  // Teams takes files by HTTPS URL only: the file is kept for download, and the message names its signed URL.
  outbound.maxFileBytes = files.maxBytes;
  outbound.sendFile = async (conversationId: string, file: OutboundFile, opts: SendFileOptions = {}) => {
    const { id, client } = await connect(conversationId);
    // The same delivery key keeps the same file: a retried send names the URL of the first.
    const kept = await storage.redisCall(() => files.store.keep(conversationId, file, opts.deliveryKey));
    const answer = await call('send file', () => client.sendToConversation(id, fileActivity(file, kept.url) as unknown as Activity));
    return { messageId: idOf(answer, 'send file') };
  };
  return outbound;
}
