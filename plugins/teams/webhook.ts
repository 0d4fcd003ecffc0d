/**
 * The messaging endpoint, `POST <path>`: an activity from Azure Bot Service
 * with its `Authorization: Bearer` token, checked before anything is parsed
 * or written (`auth.ts`): no, forged, expired or foreign token → 401; a
 * malformed activity → 400; a `serviceUrl` the token does not name or the
 * allow-list does not hold → 401; a token that would outlive the replay
 * window → 401 (so an activity replayed after its dedupe key expired comes
 * with an expired token); handled → 200. A RedisUnavailableError
 * becomes 503 in the server's error handler, so Bot Service delivers again
 * (deduped by the activity id).
 */
import { json, type RouteRegistry, readJsonBody } from 'steerbot/plugin';
import { activitySchema, type TeamsActivity } from './activity-schema.js';
import { type ServiceUrlPolicy, serviceUrlClaimMatches, type TokenVerdict } from './auth.js';

/** Options of `registerWebhookRoute`. */
export interface WebhookRouteOptions {
  path: string;
  /** Checks the `Authorization` header. */
  checkToken(authorization: string | string[] | undefined): Promise<TokenVerdict>;
  policy: ServiceUrlPolicy;
  /** Longest a token may still be valid for, in seconds: the replay window less the clock tolerance. */
  maxTokenLifeSeconds: number;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
  /** Handles one checked activity; its result is the 200 body. */
  handle(activity: TeamsActivity): Promise<Record<string, unknown>>;
  /** Told why a request was refused (no secret in it). */
  refused(reason: string): void;
}

/** Registers `POST <path>` with the host's routes (before it listens). */
export function registerWebhookRoute(routes: RouteRegistry, o: WebhookRouteOptions): void {
  routes.add({
    method: 'POST',
    path: o.path,
    async handle(req) {
      const verdict = await o.checkToken(req.headers.authorization);
      const exp = verdict.ok ? verdict.claims.exp : undefined;
      const life = typeof exp === 'number' ? exp - (o.now ?? Date.now)() / 1000 : Number.POSITIVE_INFINITY;
      if (!verdict.ok || life > o.maxTokenLifeSeconds) {
        o.refused(verdict.ok ? 'token outlives the replay window' : verdict.reason);
        return json(401, { error: 'missing or invalid bearer token' });
      }
      const parsed = readJsonBody(req, activitySchema, 'activity');
      if (!parsed.ok) return parsed.response;
      const { serviceUrl } = parsed.value;
      if (!serviceUrlClaimMatches(verdict.claims, serviceUrl) || !o.policy.allows(serviceUrl)) {
        o.refused('serviceUrl not vouched for or not allowed');
        return json(401, { error: 'serviceUrl not allowed' });
      }
      return json(200, await o.handle(parsed.value));
    },
  });
}
