/**
 * Who may use a browser page the host serves (the web chat, the operator
 * console). Every private page needs a secret: whoever presents it, as a
 * cookie (set once by opening the page with `?token=`) or
 * `Authorization: Bearer`, gets in. There is no open-to-localhost default:
 * behind a reverse proxy on the same machine every internet client arrives
 * from 127.0.0.1 with a local `Host` and (nginx's default) no forwarding
 * header, so "looks local" says nothing about who it is.
 *
 * Only when the operator opts in (`allowLoopback`) may loopback clients in
 * without the secret, meaning all of
 * - the TCP peer is 127.0.0.0/8 or ::1 (not a forwarded address: `http.host`
 *   may be `0.0.0.0`, so the bind address alone says nothing);
 * - the request carries no `Forwarded` / `X-Forwarded-*` header;
 * - its `Host` names a loopback host, so a web page whose domain was rebound
 *   to 127.0.0.1 (DNS rebinding) does not pass for the local user.
 * State-changing requests must also be same-origin JSON (`sameOriginJson`),
 * which a page on another site cannot send without a CORS preflight we never answer.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { RouteRequest, RouteResponse } from './routes.js';

/** One way into a page: a secret, and the cookie that carries it once a browser logged in. */
export interface PageAccess {
  /** The secret. */
  token: string;
  /** Name of the cookie that carries the token. */
  cookie: string;
  /** Path the cookie is sent for, e.g. `/`. */
  cookiePath: string;
  /** Let loopback clients in without the token (see the file comment). Default false: unsafe behind a reverse proxy on the same machine. */
  allowLoopback?: boolean;
}

/**
 * Who may use a page: one way in or several (any one opens it; a `?token=`
 * login sets the cookie of the one whose secret it is), or `'public'`:
 * everyone, no login.
 */
export type PageGuard = PageAccess | readonly PageAccess[] | 'public';

/** Whether a request may use the page, and why not. */
export type AccessVerdict = { ok: true; via: 'token' | 'loopback' | 'public' } | { ok: false; status: 401; error: string };

/** The operator's login cookie: sent for every path, so one login opens the console and every page private to the operator. */
export const OPERATOR_COOKIE = 'steerbot_console';

/** The operator's way in (the console's secret), shared by the console and the pages private to the operator. */
export function operatorAccess(token: string, allowLoopback = false): PageAccess {
  return { token, cookie: OPERATOR_COOKIE, cookiePath: '/', allowLoopback };
}

/** A fresh random secret for the operator's login when none is configured: 256 bits, URL-safe. */
export function generateLoginSecret(): string {
  return randomBytes(32).toString('base64url');
}

const header = (req: Pick<RouteRequest, 'headers'>, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** Whether `address` (as a socket reports it) is a loopback address. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  return a === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(a);
}

/** Whether a bind address or host name (`http.host`, a Host header's name) is loopback-only. */
export function isLoopbackHostName(name: string): boolean {
  const n = name.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return n === 'localhost' || n.endsWith('.localhost') || isLoopbackAddress(n);
}

/** The host name of a Host header (`localhost:8080` → `localhost`, `[::1]:80` → `::1`). */
function hostName(host: string): string {
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(host);
  if (v6) return v6[1]!;
  return host.replace(/:\d+$/, '');
}

/** Headers a proxy adds; one of them means the loopback peer is not the client. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'] as const;

/** Whether the request comes from this machine, directly, addressed to a loopback name (see the file comment). */
export function isLoopbackRequest(req: Pick<RouteRequest, 'headers' | 'remoteAddress'>): boolean {
  if (!isLoopbackAddress(req.remoteAddress)) return false;
  if (FORWARDING_HEADERS.some((h) => header(req, h) !== undefined)) return false;
  const host = header(req, 'host');
  return host !== undefined && isLoopbackHostName(hostName(host));
}

/**
 * Whether the client reached us over HTTPS, as the TLS-terminating proxy in
 * front says (`X-Forwarded-Proto: https`, `Forwarded: proto=https`); the host
 * itself serves plain HTTP. Used only to mark the login cookie `Secure`: a
 * forged claim gains nothing (the browser then keeps the cookie off plain
 * HTTP, locking out only the forger), so no proxy trust setting is needed.
 */
export function isHttpsRequest(req: Pick<RouteRequest, 'headers'>): boolean {
  const proto = header(req, 'x-forwarded-proto');
  if (proto?.split(',')[0]?.trim().toLowerCase() === 'https') return true;
  const forwarded = header(req, 'forwarded');
  return forwarded !== undefined && /(?:^|[;,\s])proto="?https"?(?:[;,\s]|$)/i.test(forwarded.split(',')[0] ?? '');
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Compares two tokens in constant time (over their digests, so lengths do not leak either). */
export function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * Every value of cookie `name` the request carries. A browser sends each cookie of that name it holds, the one with
 * the longest path first: one planted by a sibling subdomain or over plain HTTP (`Path=/console`) comes before the
 * login's (`Path=/`), so reading only the first would lock the operator out.
 */
function cookieValues(req: Pick<RouteRequest, 'headers'>, name: string): string[] {
  const raw = header(req, 'cookie');
  if (!raw) return [];
  const out: string[] = [];
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i <= 0 || part.slice(0, i).trim() !== name) continue;
    try {
      out.push(decodeURIComponent(part.slice(i + 1).trim()));
    } catch {
      // Not a value this page ever set: it opens nothing.
    }
  }
  return out;
}

const ways = (guard: PageAccess | readonly PageAccess[]): readonly PageAccess[] => (Array.isArray(guard) ? guard : [guard as PageAccess]);

/** What a refused browser is told. */
const LOG_IN = 'log in first: open the login link steerbot printed when it started (or the page with ?token=<token>), or send Authorization: Bearer <token>';

/**
 * Decides whether `req` may use the page. A bearer token must be right (a
 * wrong one is refused, loopback or not); a cookie that no longer matches
 * (the secret changed at a restart) counts as no login.
 */
export function checkAccess(req: Pick<RouteRequest, 'headers' | 'remoteAddress'>, guard: PageGuard): AccessVerdict {
  if (guard === 'public') return { ok: true, via: 'public' };
  const list = ways(guard);
  const auth = header(req, 'authorization');
  if (auth?.startsWith('Bearer ')) {
    const given = auth.slice('Bearer '.length);
    return list.some((a) => sameToken(given, a.token)) ? { ok: true, via: 'token' } : { ok: false, status: 401, error: 'bad token' };
  }
  let stale = false;
  for (const a of list) {
    for (const given of cookieValues(req, a.cookie)) {
      if (sameToken(given, a.token)) return { ok: true, via: 'token' };
      stale = true;
    }
  }
  if (list.some((a) => a.allowLoopback) && isLoopbackRequest(req)) return { ok: true, via: 'loopback' };
  return { ok: false, status: 401, error: stale ? `your login is no longer valid (a restart without a configured token makes a new one); ${LOG_IN}` : LOG_IN };
}

/**
 * `Set-Cookie` that stores the token for the page: HttpOnly (page scripts
 * never see it), SameSite=Strict (other sites' requests never carry it), and
 * Secure when the login came over HTTPS (it is then never sent over plain HTTP).
 */
export function tokenCookie(access: PageAccess, token: string, secure = false): string {
  return `${access.cookie}=${encodeURIComponent(token)}; Path=${access.cookiePath}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/**
 * Whether a state-changing request is JSON from the page's own origin: its
 * content type is JSON (another site cannot send that without a preflight)
 * and its `Origin`, when present, is the host it was sent to.
 */
export function sameOriginJson(req: Pick<RouteRequest, 'headers'>): boolean {
  const type = header(req, 'content-type') ?? '';
  return /^application\/json\b/i.test(type) && ownOrigin(req);
}

/**
 * Whether a GET that hands out data was sent from the page's own origin or
 * typed in, not by another site: `Sec-Fetch-Site` (current browsers send it
 * with every request) is `same-origin` or `none`, and an `Origin`, when
 * present, is the host it was sent to. Clients that are not browsers send
 * neither and pass: they hold the token. The login cookie (SameSite=Strict)
 * already stays off other sites' requests; this also holds for a browser let
 * in as a loopback client, which sends no cookie at all.
 */
export function sameOriginRead(req: Pick<RouteRequest, 'headers'>): boolean {
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  return ownOrigin(req);
}

/** The request's `Origin`, when present, is the host it was sent to. */
function ownOrigin(req: Pick<RouteRequest, 'headers'>): boolean {
  const origin = header(req, 'origin');
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === header(req, 'host');
  } catch {
    return false;
  }
}

/** Security headers of every page response: no framing, no sniffing, scripts and styles from the page's own origin only. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

const UNAUTHORIZED: RouteResponse = {
  status: 401,
  headers: { ...PAGE_HEADERS, 'content-type': 'text/plain; charset=utf-8' },
  body: 'Unauthorized\n\nOpen the login link steerbot printed when it started, or ask the operator for access.\n',
};

/**
 * The answer to a GET of the page itself: with `?token=` (a right one), a
 * 303 to `location` that stores the token in its cookie, so it leaves the
 * URL; a wrong token or a refused request gets 401; else the page, `html()`.
 */
export function servePage(
  req: Pick<RouteRequest, 'headers' | 'remoteAddress' | 'query'>,
  guard: PageGuard,
  location: string,
  html: () => string,
): RouteResponse {
  const page = (): RouteResponse => ({ status: 200, headers: { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8' }, body: html() });
  if (guard === 'public') return page();
  const given = req.query.token;
  if (given !== undefined) {
    const way = ways(guard).find((a) => sameToken(given, a.token));
    if (!way) return UNAUTHORIZED;
    return { status: 303, headers: { 'set-cookie': tokenCookie(way, given, isHttpsRequest(req)), location, 'cache-control': 'no-store' }, body: '' };
  }
  return checkAccess(req, guard).ok ? page() : UNAUTHORIZED;
}
