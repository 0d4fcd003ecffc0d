/**
 * The chat's API, what the page calls: `POST /chat/api/messages` (a message,
 * through the same ingest path as every other channel) and
 * `GET /chat/api/events` (the conversation's event stream). A browser
 * presents its visitor secret on both (in the body, in a header; never in a
 * URL): whoever knows it reads the conversation and writes as its visitor.
 * Downstream the visitor goes by the public id derived from it
 * (`visitor-id.ts`), never by the secret. Because the browser picks its
 * secret, the per-client limits come first: each client address
 * (`client-address.ts`) may start only so many conversations an hour
 * (`new-conversations.ts`) and hold only so many event streams
 * (`events.ts`); over either it gets 429 and nothing is written.
 */
import type { ChannelHost, InboundMessage } from 'steerbot/channel';
import { eventStream, json, type Logger, pages, type RedisClient, type RouteRequest, type RouteResponse, readJsonBody } from 'steerbot/plugin';
import { z } from 'zod';
import { ClientAddresses } from './client-address.js';
import type { WebConfig } from './config.js';
import { WebEventStreams } from './events.js';
import { NewConversationLimit } from './new-conversations.js';
import { WEB_CHANNEL_ID } from './outbound.js';
import { publicConversationId, VISITOR_SECRET_RE, VisitorIds } from './visitor-id.js';

/**
 * The request header that carries the visitor's secret on `GET /chat/api/events`: it never travels
 * in the URL (proxy access logs, browser history).
 */
export const CONVERSATION_HEADER = 'x-steerbot-conversation';

/** A message's id: URL-safe, no `:` (ids are joined with it). */
const MESSAGE_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

const messageBodySchema = z.strictObject({
  conversation: z.string().regex(VISITOR_SECRET_RE, { error: 'expected 8-64 characters of A-Z a-z 0-9 _ -' }),
  id: z.string().regex(MESSAGE_ID_RE, { error: 'expected 1-64 characters of A-Z a-z 0-9 _ -' }),
  text: z.string().refine((t) => t.trim() !== '', { error: 'text is empty' }),
});

/** 429 with `Retry-After` (whole seconds). */
function tooMany(error: string, retryAfterMs: number): RouteResponse {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return { ...json(429, { error, retryAfterSeconds: seconds }), headers: { 'retry-after': String(seconds) } };
}

/** What the API needs. */
export interface ChatApiOptions {
  config: WebConfig;
  /** Who may chat (`pages.checkAccess`). */
  access: pages.PageGuard;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
}

/** The chat's API routes and their state. */
export class ChatApi {
  /** Set by the channel's `start`: where messages go. */
  host: ChannelHost | undefined;
  readonly streams: WebEventStreams;
  private readonly addresses: ClientAddresses;
  private readonly newConversations: NewConversationLimit;
  private readonly visitors: VisitorIds;
  private proxyWarned = false;

  constructor(private readonly o: ChatApiOptions) {
    const c = o.config;
    this.streams = new WebEventStreams({
      redis: o.redis,
      prefix: o.prefix,
      logger: o.logger,
      historyEntries: c.historyEntries,
      maxClients: c.maxStreamClients,
      maxPerClient: c.maxStreamsPerClient,
    });
    this.addresses = new ClientAddresses(c.trustedProxies);
    this.newConversations = new NewConversationLimit({ redis: o.redis, prefix: o.prefix, perHour: c.newConversationsPerHour });
    this.visitors = new VisitorIds({ redis: o.redis, prefix: o.prefix });
  }

  /** `POST /chat/api/messages`: 401 without the chat's login, 403 cross-site, 400 bad body, 429 over the client's new-conversation limit. */
  readonly send = async (req: RouteRequest): Promise<RouteResponse> => {
    const verdict = pages.checkAccess(req, this.o.access);
    if (!verdict.ok) return json(401, { error: verdict.error });
    if (!pages.sameOriginJson(req)) return json(403, { error: 'expected a same-origin JSON request' });
    const parsed = readJsonBody(req, messageBodySchema);
    if (!parsed.ok) return parsed.response;
    const body = parsed.value;
    // From here on the visitor goes by its public id: the secret (`body.conversation`) goes no further.
    // Asked together (three slots, one round trip): which conversation, and was the public one admitted before.
    const [{ conversationId, chatId, legacy }, marked] = await Promise.all([
      this.visitors.resolve(body.conversation),
      this.newConversations.marked(publicConversationId(body.conversation)),
    ]);
    const admission = await this.newConversations.admit(this.clientOf(req), conversationId, legacy ? undefined : marked);
    if (admission.kind === 'limited') {
      return tooMany(`too many new conversations from your address: ${this.o.config.newConversationsPerHour} an hour`, admission.retryAfterMs);
    }
    const message: InboundMessage = {
      conversationId,
      updateKey: `${conversationId}:${body.id}`,
      chatId,
      sender: { id: chatId, name: 'web user' },
      text: body.text,
      messageId: body.id,
    };
    const result = await this.host!.receive(WEB_CHANNEL_ID, message);
    switch (result.kind) {
      case 'ignored':
        return json(403, { error: `ignored: ${result.reason}` });
      case 'command':
        return json(200, { result: 'command', command: result.command, duplicate: result.duplicate });
      case 'ingested':
        return json(200, { result: result.result.kind, ...result.result });
    }
  };

  /**
   * `GET /chat/api/events`, the conversation of the secret in the `X-Steerbot-Conversation` header: 401 without
   * the chat's login, 400 for a bad secret or one in the URL, 429 over the client's streams, 503 when every place is taken.
   */
  readonly events = async (req: RouteRequest): Promise<RouteResponse> => {
    const verdict = pages.checkAccess(req, this.o.access);
    if (!verdict.ok) return json(401, { error: verdict.error });
    // Refused even when valid, so no client keeps sending it where proxies and browsers keep URLs.
    if (req.query.conversation !== undefined) return json(400, { error: `send the conversation id in the ${CONVERSATION_HEADER} header, never in the URL` });
    const header = req.headers[CONVERSATION_HEADER];
    const secret = typeof header === 'string' ? header : '';
    if (!VISITOR_SECRET_RE.test(secret))
      return json(400, { error: `bad conversation id: expected a ${CONVERSATION_HEADER} header of 8-64 characters of A-Z a-z 0-9 _ -` });
    const held = this.streams.hold(this.clientOf(req), req.signal);
    if (!held.ok) {
      if (held.reason === 'full') return json(503, { error: 'too many open chat pages' });
      return json(429, { error: `too many open chat pages from your address: at most ${this.o.config.maxStreamsPerClient}` });
    }
    const last = req.headers['last-event-id'];
    let conversationId: string;
    let from: [string, string];
    try {
      ({ conversationId } = await this.visitors.resolve(secret));
      from = await this.streams.cursors(conversationId, typeof last === 'string' ? last : undefined);
    } catch (err) {
      held.place.release();
      throw err;
    }
    return eventStream(this.streams.stream(held.place, conversationId, from, req.signal));
  };

  /** The request's client key; warns once when a peer that is not a listed proxy forwards (its clients then share one limit). */
  private clientOf(req: RouteRequest): string {
    if (!this.proxyWarned && this.addresses.ignoresForwarding(req)) {
      this.proxyWarned = true;
      this.o.logger.warn(
        { peer: req.remoteAddress },
        'web chat requests carry X-Forwarded-For from a peer channels.web.trustedProxies does not list: its clients share one limit (list your proxy there)',
      );
    }
    return this.addresses.of(req);
  }
}
