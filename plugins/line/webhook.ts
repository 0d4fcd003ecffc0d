/**
 * The webhook route, `POST <path>`: a delivery signed with the channel secret
 * in `x-line-signature` (base64 HMAC-SHA256 of the raw body), checked with
 * the SDK's `validateSignature` (a timing-safe comparison) before anything
 * is parsed: a wrong or missing signature → 401, a malformed body → 400,
 * both with nothing written; handled → 200. A RedisUnavailableError becomes
 * 503 in the server's error handler, so LINE delivers again (when
 * redelivery is on; redeliveries are deduped by `webhookEventId`).
 */
import { validateSignature } from '@line/bot-sdk';
import { json, type RouteRegistry, readJsonBody } from 'steerbot/plugin';
import { type LinePayload, webhookPayloadSchema } from './payload-schema.js';

/** Header LINE carries the body's signature in. */
export const SIGNATURE_HEADER = 'x-line-signature';

/** Options of `registerWebhookRoute`. */
export interface WebhookRouteOptions {
  path: string;
  channelSecret: string;
  /** Handles one checked delivery; its result is the 200 body. */
  handle(payload: LinePayload): Promise<Record<string, unknown>>;
}

/** Whether `signature` is the channel secret's signature of `body`. A malformed signature is a wrong one. */
export function signatureValid(body: string | Buffer, channelSecret: string, signature: unknown): boolean {
  if (typeof signature !== 'string' || signature.length === 0 || signature.length > 128) return false;
  return validateSignature(body, channelSecret, signature);
}

/** Registers `POST <path>` with the host's routes (before it listens). */
export function registerWebhookRoute(routes: RouteRegistry, o: WebhookRouteOptions): void {
  routes.add({
    method: 'POST',
    path: o.path,
    async handle(req) {
      if (!signatureValid(req.body, o.channelSecret, req.headers[SIGNATURE_HEADER])) {
        return json(401, { error: 'missing or wrong x-line-signature' });
      }
      const parsed = readJsonBody(req, webhookPayloadSchema, 'delivery');
      if (!parsed.ok) return parsed.response;
      return json(200, await o.handle(parsed.value));
    },
  });
}
