/**
 * Who may POST activities, and where replies may go.
 *
 * Activities come from Bot Service, whose tokens are issued by
 * `https://api.botframework.com`, signed with the keys it publishes and
 * name the activity's service URL in a `serviceurl` claim (Microsoft's
 * "Authenticate requests with the Bot Connector API"; Bot Framework's
 * `ToBotFromChannelTokenValidationParameters`). Only such tokens are taken:
 * RS256 with a published key, issuer Bot Service, audience the App ID, not
 * expired (five minutes of clock difference allowed), and a `serviceurl`
 * equal to the activity's. An Entra token (`sts.windows.net/<tenant>/`,
 * `login.microsoftonline.com/<tenant>/v2.0`) is refused even for the right
 * audience: any app registration of the tenant can get one for the bot's
 * App ID, and it says nothing about which user wrote.
 *
 * A service URL receives the bot's Bot Connector token, so it must be on an
 * allow-list: Teams' own Bot Connector hosts (https only) and the configured
 * ones. Hosts under which anyone can register a name (Azure Storage,
 * SharePoint) are on neither by default.
 */
import { verify } from 'node:crypto';
import { OutboundHostValidator } from '@microsoft/agents-hosting';
import { SigningKeys } from './signing-keys.js';

/** The only issuer of the tokens Bot Service sends activities with. */
const BOT_FRAMEWORK_ISSUER = 'https://api.botframework.com';

/** How far past its `exp` (and before its `nbf`) a token is still accepted, in seconds. */
export const CLOCK_TOLERANCE_SECONDS = 300;

/** Hosts Teams' Bot Connector answers on: the public cloud's and the government clouds' (GCC, GCC High, DoD). */
const TEAMS_SERVICE_HOSTS: readonly string[] = ['smba.trafficmanager.net', 'teams.microsoft.com', 'teams.microsoft.us'];

/** What checks the tokens. */
export interface TokenCheckOptions {
  /** The audience every token must name. */
  appId: string;
  /** Where Bot Service's signing keys are published. */
  keysUrl: string;
  /** Timeout of one key fetch, in ms. */
  timeoutMs: number;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The verdict on one `Authorization` header: the token's claims, or why it was refused (no secret in it). */
export type TokenVerdict = { ok: true; claims: Record<string, unknown> } | { ok: false; reason: string };

const refuse = (reason: string): TokenVerdict => ({ ok: false, reason });

/** The JSON object of one base64url JWT part, or undefined. */
function jsonPart(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Why the claims of a correctly signed token are not acceptable, or undefined. */
function claimsProblem(claims: Record<string, unknown>, appId: string, nowSeconds: number): string | undefined {
  const { aud, exp, nbf } = claims;
  if (typeof aud !== 'string' || aud.toLowerCase() !== appId.toLowerCase()) return 'audience is not the App ID';
  if (typeof exp !== 'number' || nowSeconds > exp + CLOCK_TOLERANCE_SECONDS) return 'expired';
  if (nbf !== undefined && (typeof nbf !== 'number' || nowSeconds < nbf - CLOCK_TOLERANCE_SECONDS)) return 'not valid yet';
  return undefined;
}

/** Builds the checker of `Authorization: Bearer <jwt>` headers. */
export function tokenChecker(o: TokenCheckOptions): (authorization: string | string[] | undefined) => Promise<TokenVerdict> {
  const keys = new SigningKeys({ url: o.keysUrl, timeoutMs: o.timeoutMs, ...(o.fetch && { fetch: o.fetch }), ...(o.now && { now: o.now }) });
  return async (authorization) => {
    const token = typeof authorization === 'string' ? /^Bearer ([\w-]+\.[\w-]+\.[\w-]+)$/i.exec(authorization.trim())?.[1] : undefined;
    if (token === undefined) return refuse('no bearer JWT');
    const [head = '', body = '', signature = ''] = token.split('.');
    const header = jsonPart(head);
    const claims = jsonPart(body);
    if (!header || !claims) return refuse('not a JWT');
    if (header.alg !== 'RS256' || typeof header.kid !== 'string' || header.crit !== undefined) return refuse('not an RS256 token with a key id');
    // The issuer is read before anything is fetched for the token: no other issuer's token gets further.
    if (claims.iss !== BOT_FRAMEWORK_ISSUER) return refuse('issuer is not Bot Service');
    const key = await keys.get(header.kid);
    if (!key.ok) return refuse(key.reason);
    if (!verify('sha256', Buffer.from(`${head}.${body}`), key.key, Buffer.from(signature, 'base64url'))) return refuse('bad signature');
    const problem = claimsProblem(claims, o.appId, (o.now ?? Date.now)() / 1000);
    return problem ? refuse(problem) : { ok: true, claims };
  };
}

/** Whether a token's `serviceurl` claim names `serviceUrl` (a token without one names none). */
export function serviceUrlClaimMatches(claims: Record<string, unknown>, serviceUrl: string): boolean {
  const claim = claims.serviceurl;
  const norm = (u: string) => u.toLowerCase().replace(/\/+$/, '');
  return typeof claim === 'string' && norm(claim) === norm(serviceUrl);
}

/** The service URLs replies may go to. */
export class ServiceUrlPolicy {
  private readonly teams: OutboundHostValidator;
  private readonly configured: OutboundHostValidator;

  /** `hosts`: allowed besides Teams' (http too); `teamsHosts`: whether `TEAMS_SERVICE_HOSTS` are allowed (https only). */
  constructor(hosts: readonly string[], teamsHosts: boolean) {
    this.teams = new OutboundHostValidator({ enabled: true, includeDefaultMicrosoftHosts: false, hosts: teamsHosts ? TEAMS_SERVICE_HOSTS : [] });
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
    return parsed.protocol === 'https:' && this.teams.isAllowed(parsed);
  }
}
