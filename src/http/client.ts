/**
 * Outbound HTTP for steerbot's own hot paths (webhook callbacks, the
 * http-agent's requests): `node:http` / `node:https` requests on keep-alive
 * agents. Not `fetch`: each undici request leaves an object graph (≈ 16 KB)
 * that a FinalizationRegistry keeps past the young generation, so a steady
 * stream of requests grows the old space until a full GC; a `node:http`
 * request on a pooled socket leaves a fraction of that.
 *
 * A request's timeout is a plain timer and its abort signal gets a listener
 * removed when the request ends: nothing is registered against a signal
 * that outlives the request (an `AbortSignal.any` over a process-long signal
 * keeps an entry per request in Node's cleanup registry, nodejs/node#55351).
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** One request. */
export interface HttpRequestInit {
  /** Default `GET`. */
  method?: string;
  headers?: OutgoingHttpHeaders;
  /** The whole body (sent with its `content-length`). */
  body?: string | Buffer;
  /** Aborts the request, or the read of its response; the error is the signal's reason. */
  signal?: AbortSignal;
  /** Gives up when the request and the read of its response body take longer, in ms; the error is an `HttpTimeoutError`. Default: no limit. */
  timeoutMs?: number;
  /**
   * Sends the request once more, on a fresh connection, when a pooled one fails before any response
   * (ECONNRESET, EPIPE). The server may have received the first one (it can reset a connection it was
   * already working on), so only for requests it may receive twice: idempotent methods, or a body that
   * carries an idempotency key. Default: true for GET, HEAD, OPTIONS, PUT and DELETE, false otherwise.
   */
  retryStaleSocket?: boolean;
}

/** A response whose headers have arrived. Read `body` to its end or call `discard()`: until then its socket is not reused. */
export interface HttpResponse {
  /** HTTP status code. */
  status: number;
  /** True for a 2xx status. */
  ok: boolean;
  /** Response headers, names in lower case. */
  headers: IncomingHttpHeaders;
  /** The body, chunk by chunk; the iteration throws when the request is aborted or times out. */
  body: AsyncIterable<Buffer>;
  /** Reads and drops the rest of the body (the socket goes back to the pool); never throws. */
  discard(): Promise<void>;
  /** Closes the response without reading it (its socket is not reused). */
  destroy(): void;
}

/** Sends one request; resolves once the response's headers arrive. Rejects on a network error, a timeout or an abort. */
export type HttpRequest = (url: string | URL, init?: HttpRequestInit) => Promise<HttpResponse>;

/** A pool of keep-alive connections and the function that sends requests on it. */
export interface HttpClient {
  request: HttpRequest;
  /** Closes the pooled connections (requests in flight are cut off). */
  close(): void;
}

/** Options of `createHttpClient`. */
export interface HttpClientOptions {
  /** Most connections open to one origin at once. Default 64. */
  maxSocketsPerOrigin?: number;
  /** How long an idle pooled connection is kept, in ms (the server's own `Keep-Alive: timeout` wins when shorter). Default 15000. */
  idleMs?: number;
}

/** The request ran out of its `timeoutMs`. */
export class HttpTimeoutError extends Error {
  /** Stable code, as Node's own network errors carry one. */
  readonly code = 'ETIMEDOUT';
  constructor(readonly timeoutMs: number) {
    super(`no complete response within ${timeoutMs} ms`);
    this.name = 'TimeoutError';
  }
}

/** Errors of a pooled socket the server closed, mostly while it sat idle; see `HttpRequestInit.retryStaleSocket`. */
const STALE_SOCKET = new Set(['ECONNRESET', 'EPIPE']);

/** Methods a server may receive twice with the same effect. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** A client with its own keep-alive pools for http and https. */
export function createHttpClient(o: HttpClientOptions = {}): HttpClient {
  const options = { keepAlive: true, maxSockets: o.maxSocketsPerOrigin ?? 64, timeout: o.idleMs ?? 15_000, scheduling: 'lifo' as const };
  const agents = { http: new HttpAgent(options), https: new HttpsAgent(options) };
  const request: HttpRequest = async (url, init = {}) => {
    const target = typeof url === 'string' ? new URL(url) : url;
    const retry = init.retryStaleSocket ?? IDEMPOTENT.has((init.method ?? 'GET').toUpperCase());
    for (let attempt = 1; ; attempt++) {
      try {
        return await send(target, init, agents);
      } catch (err) {
        if (attempt === 1 && retry && err instanceof StaleSocket) continue;
        throw err instanceof StaleSocket ? err.cause : err;
      }
    }
  };
  return {
    request,
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/** A reused connection failed before any response (sent again only where `retryStaleSocket` allows). */
class StaleSocket extends Error {
  constructor(override readonly cause: unknown) {
    super('a pooled connection was closed by the server');
  }
}

function send(target: URL, init: HttpRequestInit, agents: { http: HttpAgent; https: HttpsAgent }): Promise<HttpResponse> {
  const { signal, timeoutMs } = init;
  if (signal?.aborted) return Promise.reject(signal.reason);
  const https = target.protocol === 'https:';
  const headers: OutgoingHttpHeaders = { ...init.headers };
  if (init.body !== undefined) headers['content-length'] = Buffer.byteLength(init.body);
  return new Promise<HttpResponse>((resolve, reject) => {
    const req = (https ? httpsRequest : httpRequest)(target, { method: init.method ?? 'GET', headers, agent: https ? agents.https : agents.http });
    let res: IncomingMessage | undefined;
    let timer: NodeJS.Timeout | undefined;
    const fail = (reason: unknown) => {
      const err = reason instanceof Error ? reason : Object.assign(new Error('the request was aborted', { cause: reason }), { name: 'AbortError' });
      req.destroy(err);
      res?.destroy(err);
    };
    const onAbort = () => fail(signal!.reason);
    /** Drops the timer and the abort listener: nothing of this request stays behind once it ends. */
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    if (timeoutMs !== undefined) timer = setTimeout(() => fail(new HttpTimeoutError(timeoutMs)), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err: NodeJS.ErrnoException) => {
      done();
      if (res) return; // the body's reader sees it
      if (req.reusedSocket && err.code !== undefined && STALE_SOCKET.has(err.code)) reject(new StaleSocket(err));
      else reject(err);
    });
    req.on('response', (r) => {
      res = r;
      r.once('close', done);
      r.on('error', () => undefined); // a reader of `body` gets the error from the iteration; unread, it must not crash the process
      resolve({
        status: r.statusCode ?? 0,
        ok: (r.statusCode ?? 0) >= 200 && (r.statusCode ?? 0) < 300,
        headers: r.headers,
        body: r,
        discard: () =>
          new Promise<void>((settle) => {
            // Read to its end even when all of it has arrived: the socket goes back to the pool only at 'end'.
            if (r.readableEnded || r.destroyed) return settle();
            r.once('end', settle).once('close', settle);
            r.resume();
          }),
        destroy: () => r.destroy(),
      });
    });
    req.end(init.body);
  });
}
