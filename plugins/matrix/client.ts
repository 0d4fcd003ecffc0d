/**
 * The few client-server API calls the channel makes, over `fetch` (the
 * channel's `ChannelDeps.fetch`, else the global one). Not `matrix-js-sdk`:
 * it is a whole client (a room and timeline store kept in memory, its own
 * sync loop, crypto), where a bot needs one `/sync` long poll whose `since`
 * lives in Redis and a handful of PUTs. Paths are under
 * `/_matrix/client/v3`, `/_matrix/client/v1/media` and (uploads)
 * `/_matrix/media/v3`; the token goes in the `Authorization` header, never
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
  call(what: string, method: 'GET' | 'PUT' | 'POST', path: string, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    const body = opts.body === undefined ? undefined : { data: JSON.stringify(opts.body), type: 'application/json' };
    return this.request(what, method, `/_matrix/client/v3/${path}`, { ...opts, body });
  }

  /** POSTs `bytes` to `/_matrix/media/v3/upload` as `filename`, of `contentType`; returns the `mxc://` URI the homeserver gave it. */
  async upload(bytes: Uint8Array, contentType: string, filename: string, opts: { timeoutMs?: number } = {}): Promise<string> {
    const answer = await this.request('media upload', 'POST', '/_matrix/media/v3/upload', {
      body: { data: bytes, type: contentType },
      query: { filename },
      ...opts,
    });
    if (typeof answer.content_uri !== 'string') throw matrixError('media upload', 502, undefined, null, this.o.accessToken, this.o.rateLimitRetryMs);
    return answer.content_uri;
  }

  /** `GET /_matrix/client/v1/media/config`: the largest upload the homeserver takes (`m.upload.size`), in bytes; undefined when it names none. */
  async uploadLimit(): Promise<number | undefined> {
    const size = (await this.request('media config', 'GET', '/_matrix/client/v1/media/config', {}))['m.upload.size'];
    return typeof size === 'number' && Number.isSafeInteger(size) && size > 0 ? size : undefined;
  }

  /** A fetch that sends the bearer token (for downloads through `fetchFile`, whose errors never name the token). */
  authedFetch(): typeof fetch {
    const inner = this.o.fetch ?? fetch;
    return (input, init) => inner(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${this.o.accessToken}` } });
  }

  /** The homeserver root. */
  get homeserverUrl(): string {
    return this.o.homeserverUrl;
  }

  private async request(
    what: string,
    method: 'GET' | 'PUT' | 'POST',
    path: string,
    opts: Omit<CallOptions, 'body'> & { body?: { data: string | Uint8Array; type: string } | undefined },
  ): Promise<Record<string, unknown>> {
    const url = new URL(`${this.o.homeserverUrl}${path}`);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = { authorization: `Bearer ${this.o.accessToken}` };
    if (opts.body !== undefined) headers['content-type'] = opts.body.type;
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.o.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      res = await (this.o.fetch ?? fetch)(url, { method, headers, signal, ...(opts.body !== undefined && { body: opts.body.data }) });
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
