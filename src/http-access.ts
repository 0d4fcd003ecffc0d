/**
 * Who may use a browser page the host serves (the web chat, the operator
 * console). With a token configured: whoever presents it, as a cookie (set
 * once by opening the page with `?token=`) or `Authorization: Bearer`.
 * Without one: loopback clients only, meaning all of
 * - the TCP peer is 127.0.0.0/8 or ::1 (not a forwarded address: `http.host`
 *   may be `0.0.0.0`, so the bind address alone says nothing);
 * - the request carries no `Forwarded` / `X-Forwarded-For` header (a reverse
 *   proxy on the same machine would make every client look local);
 * - its `Host` names a loopback host, so a web page whose domain was rebound
 *   to 127.0.0.1 (DNS rebinding) does not pass for the local user.
 * State-changing requests must also be same-origin JSON (`sameOriginJson`),
 * which a page on another site cannot send without a CORS preflight we never answer.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RouteRequest, RouteResponse } from './http-routes.js';

/** How one page is protected. */
export interface PageAccess {
  /** The token; undefined: loopback clients only. */
  token: string | undefined;
  /** Name of the cookie that carries the token. */
  cookie: string;
  /** Path the cookie is sent for, e.g. `/console`. */
  cookiePath: string;
}

/** Whether a request may use the page, and why not. */
export type AccessVerdict = { ok: true; via: 'token' | 'loopback' } | { ok: false; status: 401; error: string };

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

/** Whether the request comes from this machine, directly, addressed to a loopback name (see the file comment). */
export function isLoopbackRequest(req: Pick<RouteRequest, 'headers' | 'remoteAddress'>): boolean {
  if (!isLoopbackAddress(req.remoteAddress)) return false;
  if (header(req, 'forwarded') !== undefined || header(req, 'x-forwarded-for') !== undefined) return false;
  const host = header(req, 'host');
  return host !== undefined && isLoopbackHostName(hostName(host));
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Compares two tokens in constant time (over their digests, so lengths do not leak either). */
export function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The value of cookie `name`, if the request carries it. */
function cookieValue(req: Pick<RouteRequest, 'headers'>, name: string): string | undefined {
  const raw = header(req, 'cookie');
  if (!raw) return undefined;
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** The token a request presents: `Authorization: Bearer`, else the page's cookie. */
function presentedToken(req: Pick<RouteRequest, 'headers'>, access: PageAccess): string | undefined {
  const auth = header(req, 'authorization');
  if (auth?.startsWith('Bearer ')) return auth.slice('Bearer '.length);
  return cookieValue(req, access.cookie);
}

/** Decides whether `req` may use the page. */
export function checkAccess(req: Pick<RouteRequest, 'headers' | 'remoteAddress'>, access: PageAccess): AccessVerdict {
  if (access.token === undefined) {
    return isLoopbackRequest(req)
      ? { ok: true, via: 'loopback' }
      : { ok: false, status: 401, error: 'only loopback clients may use this page without a token (none is configured)' };
  }
  const given = presentedToken(req, access);
  if (given === undefined) return { ok: false, status: 401, error: 'a token is required' };
  return sameToken(given, access.token) ? { ok: true, via: 'token' } : { ok: false, status: 401, error: 'bad token' };
}

/** `Set-Cookie` that stores the token for the page (HttpOnly, SameSite=Strict: other sites' requests never carry it). */
export function tokenCookie(access: PageAccess, token: string): string {
  return `${access.cookie}=${encodeURIComponent(token)}; Path=${access.cookiePath}; HttpOnly; SameSite=Strict`;
}

/**
 * Whether a state-changing request is JSON from the page's own origin: its
 * content type is JSON (another site cannot send that without a preflight)
 * and its `Origin`, when present, is the host it was sent to.
 */
export function sameOriginJson(req: Pick<RouteRequest, 'headers'>): boolean {
  const type = header(req, 'content-type') ?? '';
  if (!/^application\/json\b/i.test(type)) return false;
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

const UNAUTHORIZED: RouteResponse = { status: 401, headers: { ...PAGE_HEADERS, 'content-type': 'text/plain; charset=utf-8' }, body: 'Unauthorized\n' };

/**
 * The answer to a GET of the page itself: with `?token=` (the right one), a
 * 303 to `location` that stores the token in the cookie, so it leaves the
 * URL; a wrong token or a refused request gets 401; else the page, `html()`.
 */
export function servePage(
  req: Pick<RouteRequest, 'headers' | 'remoteAddress' | 'query'>,
  access: PageAccess,
  location: string,
  html: () => string,
): RouteResponse {
  const given = req.query.token;
  if (given !== undefined) {
    if (access.token === undefined || !sameToken(given, access.token)) return UNAUTHORIZED;
    return { status: 303, headers: { 'set-cookie': tokenCookie(access, given), location, 'cache-control': 'no-store' }, body: '' };
  }
  if (!checkAccess(req, access).ok) return UNAUTHORIZED;
  return { status: 200, headers: { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8' }, body: html() };
}
