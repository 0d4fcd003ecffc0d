/**
 * The bot's own Bot Connector token: OAuth 2.0 client credentials at
 * `<authorityEndpoint>/<tenant>/oauth2/v2.0/token` for the scope
 * `https://api.botframework.com/.default`, kept until five minutes before it
 * expires. One request at a time: concurrent sends share it. The SDK's own
 * token provider is MSAL, which accepts only https authorities with their
 * instance discovery, so a local fake could not stand in for Entra.
 */
import { type TeamsApiError, teamsStatusError } from './errors.js';

/** Scope of a Bot Connector token. */
const BOT_CONNECTOR_SCOPE = 'https://api.botframework.com/.default';
/** A token is renewed this long before it expires, in ms. */
const RENEW_MARGIN_MS = 5 * 60_000;

/** What gets the token. */
export interface TokenSourceOptions {
  appId: string;
  appPassword: string;
  tenantId: string;
  authorityEndpoint: string;
  timeoutMs: number;
  rateLimitRetryMs: number;
  fetch?: typeof fetch;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The bot's token, fetched when missing or about to expire. */
export class TokenSource {
  private cached: { token: string; renewAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(private readonly o: TokenSourceOptions) {}

  /** A valid token; throws TeamsApiError when the token endpoint refuses or fails. */
  get(): Promise<string> {
    const now = (this.o.now ?? Date.now)();
    if (this.cached && now < this.cached.renewAt) return Promise.resolve(this.cached.token);
    this.pending ??= this.fetchToken().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  /** Forgets the token (the connector refused it). */
  forget(): void {
    this.cached = undefined;
  }

  private fail(message: string, status: number, retryAfter: string | null): TeamsApiError {
    return teamsStatusError(message, status, retryAfter, this.o.rateLimitRetryMs, [this.o.appPassword]);
  }

  private async fetchToken(): Promise<string> {
    const { appId, appPassword, tenantId, authorityEndpoint } = this.o;
    const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: appId, client_secret: appPassword, scope: BOT_CONNECTOR_SCOPE });
    let res: Response;
    try {
      res = await (this.o.fetch ?? fetch)(`${authorityEndpoint}/${encodeURIComponent(tenantId)}/oauth2/v2.0/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
        signal: AbortSignal.timeout(this.o.timeoutMs),
      });
    } catch (err) {
      throw this.fail(`teams token failed: network error: ${err instanceof Error ? err.message : String(err)}`, 0, null);
    }
    const answer = (await res.json().catch(() => ({}))) as { access_token?: unknown; expires_in?: unknown; error?: unknown };
    if (!res.ok || typeof answer.access_token !== 'string') {
      const error = typeof answer.error === 'string' ? answer.error : '';
      // A refused client secret is a setting to fix, not a call to repeat: 401 (not retried).
      throw this.fail(`teams token failed: ${res.status} ${error}`.trim(), res.ok ? 502 : res.status, res.headers.get('retry-after'));
    }
    const seconds = typeof answer.expires_in === 'number' ? answer.expires_in : 3600;
    this.cached = { token: answer.access_token, renewAt: (this.o.now ?? Date.now)() + Math.max(0, seconds * 1000 - RENEW_MARGIN_MS) };
    return answer.access_token;
  }
}
