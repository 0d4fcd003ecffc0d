/**
 * The one way steerbot fetches a URL on a user's or a model's behalf
 * (attachment URLs, the `http_fetch` tool, search backends): a GET (or POST) with redirects followed by
 * hand, each hop checked before anything is sent: its scheme (http/https),
 * the caller's allow-list, and the address its host resolves to
 * (`address-policy.ts`). The connection goes to exactly the address that was
 * checked (a `lookup` on the request), so a DNS answer that changes between
 * check and connect gains nothing; no connection is pooled, so one caller's
 * allowance never carries over to another's request. Bodies are bounded while
 * they stream, the whole fetch (redirects included) by time.
 */
import type { LookupAddress } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { childController } from '../abort.js';
import { FetchRefusedError } from '../errors.js';
import { AddressPolicy } from './address-policy.js';

/** Resolves a host name to every address it has (the seam tests use to point names at local servers). */
export type ResolveHost = (hostname: string) => Promise<LookupAddress[]>;

/** Options of `guardedFetch`. */
export interface GuardedFetchOptions {
  /** Largest body read, in bytes. */
  maxBytes: number;
  /** Past `maxBytes`: `error` refuses (`too_large`, also when the declared length is over it), `truncate` keeps the first `maxBytes`. Default `error`. */
  oversize?: 'error' | 'truncate';
  /** Time limit of the whole fetch, redirects and body included, in ms. Default 30000. */
  timeoutMs?: number;
  /** Most redirects followed. Default 5. */
  maxRedirects?: number;
  /** Checked for the first URL and for every redirect target: false refuses that hop (`host`). Default: any http(s) URL. */
  allowUrl?: (url: URL) => boolean;
  /** Host names, IP addresses or CIDR ranges that may be reached although they are not public. Default none. */
  allowPrivate?: readonly string[];
  /** Request headers. Default a `user-agent: steerbot` header only. */
  headers?: Record<string, string>;
  /** Request method. Default `GET`. A 301, 302 or 303 answer to a POST is followed with a GET and no body; a 307 or 308 sends the same POST again. */
  method?: 'GET' | 'POST';
  /** Request body (`POST` only). */
  body?: string | Buffer;
  /** Aborts the fetch (the caller's abort error is thrown as is). */
  signal?: AbortSignal;
  /** Names what is fetched in error messages. Default `URL`. */
  label?: string;
  /** DNS resolution. Default `node:dns` lookup of all addresses. */
  resolve?: ResolveHost;
}

/** The final answer of a guarded fetch. */
export interface GuardedResponse {
  /** HTTP status of the last hop. */
  status: number;
  /** URL of the last hop. */
  url: string;
  /** Redirects followed. */
  redirects: number;
  headers: IncomingHttpHeaders;
  /** The body, at most `maxBytes`. */
  data: Buffer;
  /** True when the body was longer than `maxBytes` and cut (`oversize: 'truncate'`). */
  truncated: boolean;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const defaultResolve: ResolveHost = (hostname) => dnsLookup(hostname, { all: true });

/** What a fetch is set up with, checked once for all its hops. */
interface Guard {
  policy: AddressPolicy;
  resolve: ResolveHost;
  label: string;
  allowUrl: ((url: URL) => boolean) | undefined;
}

/**
 * GETs (or POSTs to) `url`, following redirects, and returns the last answer (whatever its status).
 * @throws FetchRefusedError when a hop's URL, host or address is not allowed, on too many redirects, a body over
 * the limit (`oversize: 'error'`) or the time limit; the caller's abort error when `signal` aborts; network errors as they come.
 */
export async function guardedFetch(url: string, o: GuardedFetchOptions): Promise<GuardedResponse> {
  const guard: Guard = { policy: new AddressPolicy(o.allowPrivate), resolve: o.resolve ?? defaultResolve, label: o.label ?? 'URL', allowUrl: o.allowUrl };
  const timeoutMs = o.timeoutMs ?? 30_000;
  const maxRedirects = o.maxRedirects ?? 5;
  // A child of the caller's signal with a listener dropped at the end, not `AbortSignal.any` over it: a run's
  // signal lives on after the fetch, and `any` would keep an entry for every fetch made under it.
  const { controller, unlink } = childController(o.signal);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException(`no complete answer within ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  const signal = controller.signal;
  let headers = o.headers ?? { 'user-agent': 'steerbot' };
  let send = firstSend(o);
  try {
    let target = parseUrl(url, guard.label);
    for (let hop = 0; ; hop++) {
      checkHop(target, guard);
      const res = await request(target, guard, headers, send, signal);
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode ?? 0) && location) {
        res.destroy();
        if (hop >= maxRedirects) throw new FetchRefusedError('redirects', `${guard.label}: more than ${maxRedirects} redirects`);
        const from = target;
        target = parseUrl(location, guard.label, target);
        send = redirectedSend(send, res.statusCode);
        headers = redirectedHeaders(headers, from, target, send);
        continue;
      }
      const { data, truncated } = await readBody(res, o.maxBytes, o.oversize ?? 'error', guard.label);
      return { status: res.statusCode ?? 0, url: target.href, redirects: hop, headers: res.headers, data, truncated };
    }
  } catch (err) {
    if (timedOut && !o.signal?.aborted) throw new FetchRefusedError('timeout', `${guard.label}: no complete answer within ${timeoutMs} ms`);
    throw err;
  } finally {
    clearTimeout(timer);
    unlink();
  }
}

function parseUrl(raw: string, label: string, base?: URL): URL {
  try {
    return new URL(raw, base);
  } catch {
    throw new FetchRefusedError('url', base ? `${label}: a redirect to an unreadable URL` : `${label}: not a URL`);
  }
}

/** The checks a hop passes before anything is resolved or sent. */
function checkHop(url: URL, guard: Guard): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new FetchRefusedError('url', `${guard.label}: ${url.protocol} URLs are not fetched, http(s) only`);
  if (url.username || url.password) throw new FetchRefusedError('url', `${guard.label}: a URL with credentials is not fetched`);
  if (guard.allowUrl && !guard.allowUrl(url)) throw new FetchRefusedError('host', `${guard.label}: ${url.host} is not an allowed host`);
  const host = hostOf(url);
  // An address literal is never looked up: check it here.
  if (isIP(host) && !guard.policy.allows(host, host)) throw new FetchRefusedError('address', `${guard.label}: ${host} is not a public address`);
}

/** The URL's host without IPv6 brackets. */
const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '');

/** A `lookup` that resolves, refuses the host when any of its addresses is not allowed, and connects only to addresses it checked. */
function checkedLookup(host: string, guard: Guard): LookupFunction {
  return (hostname, options, callback) => {
    guard.resolve(hostname).then(
      (all) => {
        const wanted = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
        if (all.length === 0 || all.some((a) => !guard.policy.allows(host, a.address))) {
          return callback(new FetchRefusedError('address', `${guard.label}: ${host} resolves to a non-public address`), '', 0);
        }
        const first = wanted[0];
        if (!first) return callback(Object.assign(new Error(`${host} has no IPv${options.family} address`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) callback(null, wanted);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

/** What one hop sends. */
type Send = { method: 'GET' } | { method: 'POST'; body: string | Buffer };

const firstSend = (o: GuardedFetchOptions): Send => (o.method === 'POST' ? { method: 'POST', body: o.body ?? '' } : { method: 'GET' });

/** What follows a redirect: as browsers do, only 307 and 308 keep the method and body. */
const redirectedSend = (send: Send, status: number | undefined): Send => (status === 307 || status === 308 ? send : { method: 'GET' });

/** Headers any host may see: what a redirect to another origin keeps (as browsers do, credentials stay behind). */
const CROSS_ORIGIN_HEADERS = new Set(['user-agent', 'accept', 'accept-language']);

/**
 * The headers of the hop after a redirect: to another origin (another host, port or scheme) only
 * `CROSS_ORIGIN_HEADERS` go on, so an API key never follows a redirect off its service; a request that
 * became a GET drops its body's headers.
 */
function redirectedHeaders(headers: Record<string, string>, from: URL, to: URL, send: Send): Record<string, string> {
  const crossOrigin = from.origin !== to.origin;
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => {
      const n = name.toLowerCase();
      if (crossOrigin && !CROSS_ORIGIN_HEADERS.has(n)) return false;
      return send.method === 'POST' || (n !== 'content-type' && n !== 'content-length');
    }),
  );
}

/** One request, not following redirects, on a connection of its own. */
function request(url: URL, guard: Guard, headers: Record<string, string>, send: Send, signal: AbortSignal): Promise<IncomingMessage> {
  const open = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = open(url, { method: send.method, headers, signal, agent: false, lookup: checkedLookup(hostOf(url), guard) }, resolve);
    req.on('error', reject);
    req.end(send.method === 'POST' ? send.body : undefined);
  });
}

/** Reads the body up to `maxBytes`, stopping the download there. */
async function readBody(res: IncomingMessage, maxBytes: number, oversize: 'error' | 'truncate', label: string): Promise<{ data: Buffer; truncated: boolean }> {
  const tooLarge = (size: number) => {
    res.destroy();
    return new FetchRefusedError('too_large', `${label} is ${size} bytes or more, more than ${maxBytes}`);
  };
  const declared = Number(res.headers['content-length']);
  if (oversize === 'error' && declared > maxBytes) throw tooLarge(declared);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    // The declared length may be missing or wrong: stop reading past the limit.
    if (size + chunk.length > maxBytes) {
      if (oversize === 'error') throw tooLarge(size + chunk.length);
      chunks.push(chunk.subarray(0, maxBytes - size));
      res.destroy();
      return { data: Buffer.concat(chunks), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { data: Buffer.concat(chunks), truncated: false };
}
