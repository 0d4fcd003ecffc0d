/**
 * The few client-server API calls the channel makes, over `fetch` (the
 * channel's `ChannelDeps.fetch`, else the global one). Not `matrix-js-sdk`:
 * it is a whole client (a room and timeline store kept in memory, its own
 * sync loop, crypto), where a bot needs one `/sync` long poll whose `since`
 * lives in Redis and a handful of PUTs. Every path is under
 * `/_matrix/client/v3`; the token goes in the `Authorization` header, never
 * in a URL.
 */
import { matrixError, networkError } from './errors.js';

/** Options of a MatrixClient. */
export interface MatrixClientOptions {
  /** Homeserver root without a trailing slash. */
  homeserverUrl: string;
  accessToken: string;
  /** Timeout of one call unless the call names its own, in ms. */
  timeoutMs: number;
  /** Wait of a 429 that names none, in ms. */
  rateLimitRetryMs: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
}

/** Options of one call. */
export interface CallOptions {
  /** JSON body. */
  body?: unknown;
  /** Query parameters. */
  query?: Record<string, string>;
  /** Aborts the call (its error is then a network error). */
  signal?: AbortSignal;
  /** This call's timeout, in ms (a long poll's is longer). Default: the client's. */
  timeoutMs?: number;
}

/** Encodes one path segment (room ids, event ids and transaction ids carry `!`, `$`, `:`). */
export const seg = (s: string): string => encodeURIComponent(s);

/** A client for one access token. Every method throws MatrixApiError (429: `retryAfterMs`). */
export class MatrixClient {
  constructor(private readonly o: MatrixClientOptions) {}

  /** Calls `method /_matrix/client/v3/<path>` and returns the parsed JSON answer. */
  async call(what: string, method: 'GET' | 'PUT' | 'POST', path: string, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    const url = new URL(`${this.o.homeserverUrl}/_matrix/client/v3/${path}`);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = { authorization: `Bearer ${this.o.accessToken}` };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.o.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      res = await (this.o.fetch ?? fetch)(url, { method, headers, signal, ...(opts.body !== undefined && { body: JSON.stringify(opts.body) }) });
      text = await res.text();
    } catch (err) {
      throw networkError(what, err, this.o.accessToken);
    }
    const body = parseJson(text);
    if (!res.ok) throw matrixError(what, res.status, body, res.headers.get('retry-after'), this.o.accessToken, this.o.rateLimitRetryMs);
    if (typeof body !== 'object' || body === null) throw matrixError(what, 502, undefined, null, this.o.accessToken, this.o.rateLimitRetryMs);
    return body as Record<string, unknown>;
  }
}

function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    return undefined;
  }
}
