/**
 * The webhook routes. `GET <path>`: Meta's verification request
 * (`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge`), answered with
 * the challenge when the token matches, else 403. `POST <path>`: a
 * delivery, signed with the app secret in `X-Hub-Signature-256` over the raw
 * body, checked before anything is parsed: a wrong or missing signature →
 * 401, a malformed body → 400, both with nothing written; handled → 200.
 * A RedisUnavailableError becomes 503 in the server's error handler, so
 * WhatsApp delivers again (redeliveries are deduped by message id).
 */
import { createHmac } from 'node:crypto';
import { json, type RouteRegistry, readJsonBody, sameToken } from 'steerbot/plugin';
import { type WebhookPayload, webhookPayloadSchema } from './payload-schema.js';

/** Header Meta carries the body's signature in. */
export const SIGNATURE_HEADER = 'x-hub-signature-256';

/** `sha256=<hex HMAC-SHA256(app secret, raw body)>`: the value of `X-Hub-Signature-256` for `body`. */
export function hubSignature(appSecret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;
}

/** Options of `registerWebhookRoutes`. */
export interface WebhookRoutesOptions {
  path: string;
  appSecret: string;
  verifyToken: string;
  /** Handles one checked delivery; its result is the 200 body. */
  handle(payload: WebhookPayload): Promise<Record<string, unknown>>;
}

/** Registers `GET <path>` (verification) and `POST <path>` (deliveries) with the host's routes (before it listens). */
export function registerWebhookRoutes(routes: RouteRegistry, o: WebhookRoutesOptions): void {
  routes.add({
    method: 'GET',
    path: o.path,
    async handle(req) {
      const { 'hub.mode': mode, 'hub.verify_token': token, 'hub.challenge': challenge } = req.query;
      if (mode !== 'subscribe' || typeof token !== 'string' || !sameToken(token, o.verifyToken) || !challenge) {
        return json(403, { error: 'verification refused: hub.mode must be subscribe and hub.verify_token must match' });
      }
      return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: challenge.slice(0, 1024) };
    },
  });
  routes.add({
    method: 'POST',
    path: o.path,
    async handle(req) {
      const given = req.headers[SIGNATURE_HEADER];
      if (typeof given !== 'string' || !sameToken(given, hubSignature(o.appSecret, req.body))) {
        return json(401, { error: 'missing or wrong X-Hub-Signature-256' });
      }
      const parsed = readJsonBody(req, webhookPayloadSchema, 'delivery');
      if (!parsed.ok) return parsed.response;
      return json(200, await o.handle(parsed.value));
    },
  });
}
