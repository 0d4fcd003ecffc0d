/**
 * The send-and-wake API, for other systems: `POST
 * /api/conversations/:id/events` (an external event becomes an input of the
 * conversation, through its input policy) and `POST
 * /api/conversations/:id/messages` (a message delivered on the
 * conversation's channel, once per `Idempotency-Key`). Both need
 * `Authorization: Bearer <host.api.token>`; bad token 401, bad body 400
 * (nothing written), unknown conversation 404, Redis down 503.
 */
import { z } from 'zod';
import type { ChannelOutbound } from '../src/channel.js';
import { ingestEvent } from '../src/events.js';
import { sameToken } from '../src/http-access.js';
import { json, type RouteRegistry, type RouteRequest, type RouteResponse, readJsonBody } from '../src/http-routes.js';
import type { IngestDeps } from '../src/ingest.js';
import { assertUpdateKey, conversationKeys } from '../src/keys.js';
import { type SendMessageRequest, type SendMessageResult, sendBodySchema } from '../src/protocol/send.js';
import type { IngestResult, InputPolicy } from '../src/protocol/types.js';
import { inputOriginSchema } from '../src/record/entries.js';
import { asRedisUnavailable, type RedisClient } from '../src/redis.js';

/** What the API routes need. */
export interface ApiRoutesOptions {
  routes: RouteRegistry;
  /** The bearer token both routes require (`host.api.token`). */
  token: string;
  redis: RedisClient;
  prefix: string;
  /** Ingest and enqueue (the host's dispatch and run queue). */
  ingest: IngestDeps;
  /** Longest text, in characters (`dispatch.maxMessageChars`). */
  maxMessageChars: number;
  /** The configured policy of a conversation's channel. */
  channelPolicy(conversationId: string): InputPolicy | undefined;
  /** The outbound side of a conversation's channel; undefined: no channel serves it (404). */
  outbound(conversationId: string): ChannelOutbound | undefined;
  /** Records and delivers a message (`MessageSender.send`). */
  send(req: SendMessageRequest): Promise<SendMessageResult>;
}

const BASE = '/api/conversations/:conversation';

const eventBodySchema = (maxChars: number) =>
  z.strictObject({
    source: inputOriginSchema.shape.source,
    id: inputOriginSchema.shape.id,
    text: z
      .string()
      .min(1, { error: 'expected non-empty text' })
      .max(maxChars, { error: `expected at most ${maxChars} characters` }),
    data: inputOriginSchema.shape.data,
  });

/** Registers both routes. */
export function registerApiRoutes(o: ApiRoutesOptions): void {
  const events = eventBodySchema(o.maxMessageChars);
  const messages = sendBodySchema(o.maxMessageChars);

  /** A route that answers 401 before reading anything, and 503 (not 500) while Redis is down. */
  const route = (path: string, handle: (req: RouteRequest, conversationId: string) => Promise<RouteResponse>) =>
    o.routes.add({
      method: 'POST',
      path: `${BASE}${path}`,
      handle: async (req) => {
        const refusal = unauthorized(req, o.token);
        if (refusal) return refusal;
        const conversationId = req.params.conversation ?? '';
        assertUpdateKey(conversationId);
        try {
          return { ...(await handle(req, conversationId)), headers: { 'cache-control': 'no-store' } };
        } catch (err) {
          throw asRedisUnavailable(err);
        }
      },
    });

  route('/events', async (req, conversationId) => {
    const body = readJsonBody(req, events);
    if (!body.ok) return body.response;
    const refusal = await unknownConversation(o, conversationId);
    if (refusal) return refusal;
    const { source, id, text, data } = body.value;
    const policy = o.channelPolicy(conversationId);
    const result = await ingestEvent(
      o.ingest,
      { conversationId, origin: { kind: 'event', source, id, ...(data !== undefined && { data }) }, text },
      policy ? { policy } : {},
    );
    return eventResponse(result);
  });

  route('/messages', async (req, conversationId) => {
    const key = header(req, 'idempotency-key');
    if (!key) return json(400, { error: 'the Idempotency-Key header is required' });
    const body = readJsonBody(req, messages);
    if (!body.ok) return body.response;
    const result = await o.send({ conversationId, idempotencyKey: key, text: body.value.text, ...(body.value.buttons && { buttons: body.value.buttons }) });
    return sendResponse(result);
  });
}

const header = (req: RouteRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** 401 unless the request carries `Authorization: Bearer <token>`. */
function unauthorized(req: RouteRequest, token: string): RouteResponse | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '');
  if (!m) return json(401, { error: 'a bearer token is required' });
  return sameToken(m[1]!, token) ? undefined : json(401, { error: 'bad token' });
}

/** 404 unless a channel serves the conversation and it has a record or the channel can open it. */
async function unknownConversation(o: ApiRoutesOptions, conversationId: string): Promise<RouteResponse | undefined> {
  const out = o.outbound(conversationId);
  if (out && (out.opensConversation?.(conversationId) || (await o.redis.exists(conversationKeys(o.prefix, conversationId).meta)) === 1)) return undefined;
  return json(404, { error: 'unknown conversation' });
}

function eventResponse(result: IngestResult): RouteResponse {
  switch (result.kind) {
    case 'duplicate':
      return json(200, { result: 'duplicate', seq: result.seq });
    case 'purged':
      return json(409, { error: 'the conversation was purged' });
    case 'refused':
      return json(429, { error: 'rate limited' });
    default:
      return json(202, { result: result.kind, seq: result.seq, runId: result.runId });
  }
}

function sendResponse(result: SendMessageResult): RouteResponse {
  switch (result.kind) {
    case 'sent':
      return json(200, { seq: result.seq, messageIds: result.messageIds, duplicate: result.duplicate });
    case 'failed':
      return json(502, { error: `recorded but not delivered: ${result.error}; retry with the same Idempotency-Key`, seq: result.seq });
    case 'busy':
      return json(409, { error: 'a send with this Idempotency-Key is in progress; retry later', seq: result.seq });
    case 'unknown-conversation':
      return json(404, { error: 'unknown conversation' });
    default:
      return json(409, { error: 'the conversation was purged' });
  }
}
