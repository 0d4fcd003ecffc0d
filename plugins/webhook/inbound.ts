/**
 * The webhook channel's inbound route: `POST <path>` with a signed JSON body.
 * The signature is checked on the raw bytes before anything is parsed;
 * a rejected request writes nothing. A signed timestamp older than
 * `maxSkewSeconds`, or than the dedupe window less a margin when that is
 * shorter, is a replay (401): a request is accepted only while its id's
 * dedupe key would still recognise it. The dedupe identity is the signed
 * body's `id`; an `Idempotency-Key` header is not read (it is not signed).
 */

import type { ChannelHost, InboundMessage } from 'steerbot/channel';
import { attachmentSchema, json, type RouteRequest, type RouteResponse, readJsonBody, replayWindowSeconds } from 'steerbot/plugin';
import { z } from 'zod';
import type { WebhookChannelConfig } from './config.js';
import { checkSignature } from './signature.js';

/** Conversation names: URL-safe, so they can appear in the event-stream path. */
export const CONVERSATION_RE = /^[A-Za-z0-9._~:@+=-]{1,128}$/;
const ID_RE = /^[^\s{}]{1,200}$/;

/** The request body. */
export const webhookBodySchema = z
  .object({
    /** Identity of this message at the sender; a repeated id is a duplicate. */
    id: z.string().regex(ID_RE, { error: 'expected 1-200 characters without whitespace or braces' }),
    /** The sender's conversation (thread, ticket, chat) id. */
    conversation: z.string().regex(CONVERSATION_RE, { error: 'expected 1-128 characters of A-Z a-z 0-9 . _ ~ : @ + = -' }),
    sender: z.object({
      id: z.string().min(1).max(128),
      name: z.string().max(256).optional(),
    }),
    text: z.string(),
    attachments: z.array(attachmentSchema).max(32).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    /** Several people share this conversation: /stop, /new, /queue, /compact and /purge are then for the channel's `admins` only. Default false (1:1). */
    group: z.boolean().optional(),
  })
  .refine((b) => b.text.trim() !== '' || (b.attachments?.length ?? 0) > 0, { error: 'text is empty and there are no attachments', path: ['text'] });

export interface InboundOptions {
  name: string;
  channelId: string;
  config: WebhookChannelConfig;
  host: () => ChannelHost;
  now: () => number;
}

/** The trace check's verdict on a request's signature (`signedBySender`), which the handler reuses: one HMAC per request. */
const checkedForTrace = new WeakMap<RouteRequest, string | undefined>();

/** Why the request's signature (and signed timestamp) is refused, or undefined when the channel's sender signed it. */
function signatureRefusal(o: InboundOptions, req: RouteRequest): string | undefined {
  if (checkedForTrace.has(req)) return checkedForTrace.get(req);
  const maxSkewSeconds = Math.min(o.config.maxSkewSeconds, replayWindowSeconds(o.host().dedupeTtlSeconds));
  return checkSignature(o.config.secret, req.headers, req.body, Math.floor(o.now() / 1000), maxSkewSeconds);
}

/**
 * Whether the request is signed by the channel's sender: the operator's own system, holding the secret the operator
 * gave it, whose trace a message continues (`HttpRoute.trustsCallerTrace`). Anyone else's request starts a trace of its own.
 */
export function signedBySender(o: InboundOptions): (req: RouteRequest) => boolean {
  return (req) => {
    const refused = signatureRefusal(o, req);
    checkedForTrace.set(req, refused);
    return refused === undefined;
  };
}

/** Builds the POST handler. */
export function inboundHandler(o: InboundOptions) {
  return async (req: RouteRequest): Promise<RouteResponse> => {
    const refused = signatureRefusal(o, req);
    if (refused) return json(401, { error: refused });

    const parsed = readJsonBody(req, webhookBodySchema);
    if (!parsed.ok) return parsed.response;
    const body = parsed.value;
    const conversationId = `${o.channelId}:${body.conversation}`;
    const message: InboundMessage = {
      conversationId,
      // The signed body's id, never a header: a header is outside the signature, so a captured request sent again
      // with another one would pass as a new message.
      updateKey: `${o.channelId}:${body.id}`,
      chatId: body.conversation,
      sender: body.sender,
      text: body.text,
      messageId: body.id,
      ...(body.attachments && { attachments: body.attachments }),
      ...(body.metadata && { metadata: body.metadata }),
      ...(body.group === true && { group: true }),
    };
    const result = await o.host().receive(o.channelId, message);
    switch (result.kind) {
      case 'ignored':
        return json(403, {
          error: result.reason === 'not-allowed' || result.reason === 'refused' ? 'sender is not allowed on this channel' : `ignored: ${result.reason}`,
        });
      case 'command':
        return result.duplicate
          ? json(200, { result: 'duplicate', command: result.command })
          : json(202, { result: 'command', command: result.command, reply: result.reply });
      case 'ingested': {
        const r = result.result;
        if (r.kind === 'duplicate') return json(200, { result: 'duplicate', seq: r.seq });
        // Recorded (a 2xx: do not resend), not answered by a run; the notice goes out like a reply.
        if (r.kind === 'refused') return json(202, { result: 'refused', seq: r.seq, limit: r.limit, retryAfterMs: r.retryAfterMs });
        // The conversation was purged and refuses updates while its tombstone stands: gone, do not resend.
        if (r.kind === 'purged') return json(410, { result: 'purged', error: 'this conversation was deleted; new messages are not accepted for now' });
        return json(202, { result: r.kind, seq: r.seq, runId: r.runId });
      }
    }
  };
}
