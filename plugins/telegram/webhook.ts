/**
 * The webhook route: Telegram POSTs each update with the `secret_token` we
 * registered in `X-Telegram-Bot-Api-Secret-Token`. Wrong or missing secret →
 * 401 (checked before the body is parsed), malformed update → 400, accepted
 * or ignored → 200; a RedisUnavailableError from the host becomes 503 in the
 * server's error handler, so Telegram delivers the update again.
 */

import { json, type RouteRegistry, readJsonBody, sameToken } from 'steerbot/plugin';
import { type TelegramUpdate, telegramUpdateSchema } from './update-schema.js';

/** Header Telegram carries the secret in. */
export const SECRET_HEADER = 'x-telegram-bot-api-secret-token';

/** Options of `registerWebhookRoute`. */
export interface WebhookRouteOptions {
  path: string;
  secret: string;
  /** Handles one validated update; its result is the 200 body. Must not include a `method` field (Telegram would run it). */
  handle(update: TelegramUpdate): Promise<Record<string, unknown>>;
}

/** Compares in constant time (`sameToken`: over digests, so the length leaks nothing either). */
function secretMatches(given: unknown, expected: string): boolean {
  return typeof given === 'string' && sameToken(given, expected);
}

/** Registers `POST <path>` with the host's routes (before it listens). */
export function registerWebhookRoute(routes: RouteRegistry, opts: WebhookRouteOptions): void {
  routes.add({
    method: 'POST',
    path: opts.path,
    async handle(req) {
      if (!secretMatches(req.headers[SECRET_HEADER], opts.secret)) return json(401, { error: 'missing or wrong X-Telegram-Bot-Api-Secret-Token' });
      const parsed = readJsonBody(req, telegramUpdateSchema, 'update');
      if (!parsed.ok) return parsed.response;
      return json(200, await opts.handle(parsed.value));
    },
  });
}
