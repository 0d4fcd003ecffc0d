/**
 * Who may POST activities, and where replies may go.
 *
 * The bearer token of each activity is checked by the Agents SDK's
 * `authorizeJWT` (audience = the app id, signature against the signing keys
 * of the issuer's JWKS, expiry with the SDK's five-minute clock tolerance,
 * and the issuer against the tenant's and Bot Service's issuers). The keys
 * of an Entra-issued token come from `<authorityEndpoint>/<tenant>/discovery/v2.0/keys`,
 * those of a Bot Service (`https://api.botframework.com`) token from its
 * published key set. A token that names a `serviceurl` must name the
 * activity's.
 *
 * A service URL receives the bot's Bot Connector token, so it must be on an
 * allow-list: the SDK's Microsoft hosts (https only) and the configured ones.
 */
import { type AuthConfiguration, authorizeJWT, OutboundHostValidator } from '@microsoft/agents-hosting';

/** What checks the tokens. */
export interface TokenCheckOptions {
  appId: string;
  tenantId: string;
  authorityEndpoint: string;
}

/** The verdict on one `Authorization` header: the token's claims, or why it was refused (no secret in it). */
export type TokenVerdict = { ok: true; claims: Record<string, unknown> } | { ok: false; reason: string };

/** Builds the checker of `Authorization: Bearer <jwt>` headers. */
export function tokenChecker(o: TokenCheckOptions): (authorization: string | string[] | undefined) => Promise<TokenVerdict> {
  const connection: AuthConfiguration = { clientId: o.appId, tenantId: o.tenantId, authorityEndpoint: o.authorityEndpoint, validateIssuer: true };
  const authorize = authorizeJWT({ ...connection, connections: new Map([['teams', connection]]) });
  return async (authorization) => {
    if (authorization === undefined) return { ok: false, reason: 'no Authorization header' };
    const req: { method: string; headers: Record<string, string | string[] | undefined>; user?: Record<string, unknown> } = {
      method: 'POST',
      headers: { authorization },
    };
    const answer = { status: 200, reason: '' };
    const res = {
      headersSent: false,
      writableEnded: false,
      status(code: number) {
        answer.status = code;
        return res;
      },
      send(body?: unknown) {
        const detail = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['jwt-auth-error'] : undefined;
        answer.reason = typeof detail === 'string' ? detail.slice(0, 200) : 'refused';
        return res;
      },
      setHeader: () => res,
      end: () => res,
    };
    let passed = false;
    await authorize(req, res, () => {
      passed = true;
    });
    return passed && req.user ? { ok: true, claims: req.user } : { ok: false, reason: answer.reason || 'refused' };
  };
}

/** Whether a token's `serviceurl` claim (when it has one) names `serviceUrl`. */
export function serviceUrlClaimMatches(claims: Record<string, unknown>, serviceUrl: string): boolean {
  const claim = claims.serviceurl;
  if (claim === undefined) return true;
  const norm = (u: string) => u.toLowerCase().replace(/\/+$/, '');
  return typeof claim === 'string' && norm(claim) === norm(serviceUrl);
}

/** The service URLs replies may go to. */
export class ServiceUrlPolicy {
  private readonly microsoft: OutboundHostValidator;
  private readonly configured: OutboundHostValidator;

  /** `hosts`: allowed besides Microsoft's (http too); `microsoftHosts`: whether the SDK's Microsoft hosts are allowed (https only). */
  constructor(hosts: readonly string[], microsoftHosts: boolean) {
    this.microsoft = new OutboundHostValidator({ enabled: true, includeDefaultMicrosoftHosts: microsoftHosts, hosts: [] });
    this.configured = new OutboundHostValidator({ enabled: true, includeDefaultMicrosoftHosts: false, hosts });
  }

  /** Whether `url` may be sent to. */
  allows(url: string): boolean {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return false;
    }
    if (parsed.username || parsed.password) return false;
    if (this.configured.isAllowed(parsed)) return parsed.protocol === 'https:' || parsed.protocol === 'http:';
    return parsed.protocol === 'https:' && this.microsoft.isAllowed(parsed);
  }
}
