/**
 * The send-and-wake API, for other systems: `POST
 * /api/conversations/:id/events` (an external event becomes an input of the
 * conversation, through its input policy) and `POST
 * /api/conversations/:id/messages` (a message delivered on the
 * conversation's channel, once per `Idempotency-Key`). Both need
 * `Authorization: Bearer <token>` of a configured API token (api-tokens.ts):
 * unknown or revoked token 401, over the token's rate 429 (with
 * `Retry-After`), outside its scopes, channels or conversations 403, bad body
 * 400, unknown conversation 404, Redis down 503 — a refusal writes and sends nothing.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ChannelOutbound } from '../src/channel.js';
import { eventUpdateKey, ingestEvent } from '../src/events.js';
import { json, type RouteRegistry, type RouteRequest, type RouteResponse, readJsonBody } from '../src/http/routes.js';
import type { IngestDeps } from '../src/ingest.js';
import { type SendMessageRequest, type SendMessageResult, sendBodySchema } from '../src/protocol/send.js';
import type { IngestResult, InputPolicy } from '../src/protocol/types.js';
import { inputOriginSchema } from '../src/record/entries.js';
import { asRedisUnavailable, type RedisClient } from '../src/redis/connection.js';
import { assertUpdateKey, conversationKeys } from '../src/redis/keys.js';
import type { ApiScope, ApiToken, ApiTokens } from './api-tokens.js';

/** What the API routes need. */
export interface ApiRoutesOptions {
  routes: RouteRegistry;
  /** The tokens the routes accept (`host.api.tokens`, `host.api.token`). */
  tokens: ApiTokens;
  redis: RedisClient;
  prefix: string;
  /** Ingest and enqueue (the host's dispatch and run queue). */
  ingest: IngestDeps;
  /** Longest text, in characters (`dispatch.maxMessageChars`). */
  maxMessageChars: number;
  /** The configured policy of a conversation's channel. */
  channelPolicy(conversationId: string): InputPolicy | undefined;
  /** The id of the configured channel that serves a conversation, if one does. */
  channelOf(conversationId: string): string | undefined;
  /** The outbound side of a conversation's channel; undefined: no channel serves it (404). */
  outbound(conversationId: string): ChannelOutbound | undefined;
  /**
   * Records and delivers a message (`MessageSender.send`); `open: false` refuses a conversation that has no record
   * yet. Its idempotency key is deduped per `token` (the name of the token that asked).
   */
  send(req: SendMessageRequest, opts: { open: boolean; token: string }): Promise<SendMessageResult>;
  /** Refusals of admitted-looking requests (revoked, over rate, out of scope) are logged here, by token name. Default: not logged. */
  logger?: Logger;
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

  /**
   * A route for one scope: 401 before reading anything but the token, 429 over
   * the token's rate, 403 out of its scope or reach, and 503 (not 500) while Redis is down.
   */
  const route = (path: string, scope: ApiScope, handle: (req: RouteRequest, conversationId: string, token: ApiToken) => Promise<RouteResponse>) =>
    o.routes.add({
      method: 'POST',
      path: `${BASE}${path}`,
      trustsCallerTrace: (req) => holdsToken(o.tokens, req),
      handle: async (req) => {
        const presented = bearer(req);
        if (presented === undefined) return json(401, { error: 'a bearer token is required' });
        const token = o.tokens.find(presented);
        if (!token) return json(401, { error: 'bad token' });
        const conversationId = req.params.conversation ?? '';
        assertUpdateKey(conversationId);
        try {
          const r = (await refusal(o, token, scope, conversationId)) ?? (await handle(req, conversationId, token));
          return { ...r, headers: { ...r.headers, 'cache-control': 'no-store' } };
        } catch (err) {
          throw asRedisUnavailable(err);
        }
      },
    });

  route('/events', 'events', async (req, conversationId, token) => {
    const body = readJsonBody(req, events);
    if (!body.ok) return body.response;
    const { source, id, text, data } = body.value;
    const origin = { kind: 'event' as const, source, id, ...(data !== undefined && { data }), ...(token.owner !== undefined && { owner: token.owner }) };
    const out = o.outbound(conversationId);
    if (!out) return json(404, { error: 'unknown conversation' });
    // One round trip (both keys are in the conversation's slot): does the conversation exist, and did 0.1.0 take this event?
    const k = conversationKeys(o.prefix, conversationId);
    const [[, exists], [, seq]] = (await o.redis
      .pipeline()
      .exists(k.meta)
      .get(k.dedupe(eventUpdateKey(origin)))
      .exec()) as [[unknown, number], [unknown, string | null]];
    const unknown = exists === 1 ? undefined : unopened(o, out, conversationId, token);
    if (unknown) return unknown;
    // Release 0.1.0 deduped an event unscoped: what it took stays taken, for the one dedupe window its key lives.
    if (seq !== null) return eventResponse(seq === '0' ? { kind: 'purged', seq: 0 } : { kind: 'duplicate', seq: Number(seq) });
    const policy = o.channelPolicy(conversationId);
    // Deduped per token; the run is charged to the token's owner (its budget, its memory); none: the operator.
    const result = await ingestEvent(o.ingest, { conversationId, origin, text, token: token.name }, policy ? { policy } : {});
    return eventResponse(result);
  });

  route('/messages', 'send', async (req, conversationId, token) => {
    const key = header(req, 'idempotency-key');
    if (!key) return json(400, { error: 'the Idempotency-Key header is required' });
    const body = readJsonBody(req, messages);
    if (!body.ok) return body.response;
    const open = token.scopes.has('open');
    const result = await o.send(
      { conversationId, idempotencyKey: key, text: body.value.text, ...(body.value.buttons && { buttons: body.value.buttons }) },
      { open, token: token.name },
    );
    // The send refused a conversation with no record: the token's missing scope says why, when its channel could open it.
    if (result.kind === 'unknown-conversation' && !open && o.outbound(conversationId)?.opensConversation?.(conversationId)) return outOfScope(token, 'open', o);
    return sendResponse(result);
  });
}

const header = (req: RouteRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/**
 * Whether the request carries a configured API token that is not revoked: its caller is a system the operator gave a
 * token to, whose trace the request continues (`HttpRoute.trustsCallerTrace`); anyone else's request starts its own.
 */
async function holdsToken(tokens: ApiTokens, req: RouteRequest): Promise<boolean> {
  const presented = bearer(req);
  const token = presented === undefined ? undefined : tokens.find(presented);
  return token !== undefined && !(await tokens.revoked(token));
}

/** The token of `Authorization: Bearer <token>`, if the request carries one. */
function bearer(req: RouteRequest): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '')?.[1];
}

/** 401 for a revoked token, 429 over its rate, 403 when `scope` or the conversation is not the token's; undefined: go on. */
async function refusal(o: ApiRoutesOptions, token: ApiToken, scope: ApiScope, conversationId: string): Promise<RouteResponse | undefined> {
  const admission = await o.tokens.admit(token);
  if (admission.kind === 'revoked') {
    o.logger?.warn({ token: token.name }, 'API request with a revoked token refused');
    return json(401, { error: 'the token is revoked' });
  }
  if (admission.kind === 'limited') {
    const seconds = Math.max(1, Math.ceil(admission.retryAfterMs / 1000));
    return {
      ...json(429, { error: `rate limited: the token may make ${token.ratePerMinute} requests a minute`, retryAfterSeconds: seconds }),
      headers: { 'retry-after': String(seconds) },
    };
  }
  if (!token.scopes.has(scope)) return outOfScope(token, scope, o);
  if (!o.tokens.reaches(token, conversationId, o.channelOf(conversationId))) {
    o.logger?.warn({ token: token.name, conversationId }, "API request outside the token's channels or conversations refused");
    return json(403, { error: 'the token may not reach this conversation (see its channels and conversations)' });
  }
  return undefined;
}

function outOfScope(token: ApiToken, scope: ApiScope, o: ApiRoutesOptions): RouteResponse {
  o.logger?.warn({ token: token.name, scope }, "API request outside the token's scopes refused");
  return json(403, { error: `the token's scopes do not include ${scope}`, scope });
}

/** A conversation with no record: 404 unless its channel can open one, then 403 without the token's `open` scope. */
function unopened(o: ApiRoutesOptions, out: ChannelOutbound, conversationId: string, token: ApiToken): RouteResponse | undefined {
  if (!out.opensConversation?.(conversationId)) return json(404, { error: 'unknown conversation' });
  return token.scopes.has('open') ? undefined : outOfScope(token, 'open', o);
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
