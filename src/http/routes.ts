/**
 * The HTTP route contract between plugins and the host's server: plain
 * request and response objects, no web framework's types. The host adapts
 * it to its server (`host/http.ts`).
 */
import type { ZodType } from 'zod';
import { parseJson } from '../json.js';

/** An HTTP request as a route handler sees it. */
export interface RouteRequest {
  /** Upper-case method, e.g. `POST`. */
  method: string;
  /** The path without the query string. */
  path: string;
  /** Values of the path's `:name` segments. */
  params: Readonly<Record<string, string>>;
  /** Query parameters (the first value of a repeated one). */
  query: Readonly<Record<string, string | undefined>>;
  /** Headers with lower-case names. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The raw body bytes (empty when there is none); parse it yourself (signatures need the raw bytes). */
  body: Buffer;
  /** Aborted when the client goes away (ends streams). */
  signal: AbortSignal;
  /** Address of the TCP peer (`127.0.0.1`, `::1`, `::ffff:10.0.0.5`), not a forwarded one; undefined when the socket is gone. */
  remoteAddress?: string;
}

/** Headers of a response. */
export type RouteHeaders = Record<string, string>;

/** What a route answers: a JSON value, raw text or bytes, or a stream of text chunks (server-sent events). */
export type RouteResponse =
  | { status: number; headers?: RouteHeaders; json: unknown }
  | {
      status: number;
      headers?: RouteHeaders;
      body?: string | Buffer;
      /** Called once when the response is done with, sent or its connection closed first (what `body` holds can go then). Must not throw. Default: none. */
      onClose?: () => void;
    }
  | {
      status: number;
      headers?: RouteHeaders;
      /** Written chunk by chunk; the response ends when it ends. It must end soon after `request.signal` aborts. */
      stream: AsyncIterable<string>;
    };

/** One route a plugin serves. */
export interface HttpRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path with optional `:name` segments, e.g. `/webhooks/crm/conversations/:conversation/events`. */
  path: string;
  /** Largest accepted body, in bytes. Default: the server's `http.bodyLimitBytes`. */
  bodyLimitBytes?: number;
  /**
   * Whether the caller of `request` is one the operator trusts with the traces it continues. True lets the request
   * continue the caller's W3C trace context (its `traceparent` header): the caller's trace id, its span as the
   * parent, its sampling decision. Answer true only for a caller this route authenticates as someone the operator
   * gave a credential to (the webhook channel's signing secret, an API token), by the check `handle` makes too
   * (`handle` still makes it); never for a platform's delivery, a browser or anyone without a credential. Asked only
   * while tracing is on and the request carries a `traceparent`; a throw counts as false. Default: no caller is
   * trusted: every request starts a trace of its own and its `traceparent` and `tracestate` are ignored.
   */
  trustsCallerTrace?(request: RouteRequest): boolean | Promise<boolean>;
  /**
   * Answers one request. A thrown InvalidInputError answers 400 and a
   * RedisUnavailableError 503 (so a platform retries); anything else 500.
   */
  handle(request: RouteRequest): Promise<RouteResponse>;
}

/** Where plugins register their routes (before the server listens). */
export interface RouteRegistry {
  /** Serves `route`. Throws when its method and path are taken. */
  add(route: HttpRoute): void;
}

/** A stream of server-sent events: the headers browsers and proxies need, and the stream. */
export const eventStream = (stream: AsyncIterable<string>): RouteResponse => ({
  status: 200,
  headers: {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // nginx would buffer the stream otherwise.
    'x-accel-buffering': 'no',
  },
  stream,
});

/** A JSON response. */
export const json = (status: number, value: unknown): RouteResponse => ({ status, json: value });

/**
 * Parses a request's body as JSON and validates it with `schema`: the value,
 * or the 400 response naming the first problem (`body is not valid JSON`,
 * `body is nested deeper than 128 levels of arrays and objects`, checked
 * before parsing: see `MAX_JSON_DEPTH`; `bad <what>: <path>: <message>`).
 */
export function readJsonBody<T>(
  req: Pick<RouteRequest, 'body'>,
  schema: ZodType<T>,
  what = 'body',
): { ok: true; value: T } | { ok: false; response: RouteResponse } {
  const body = parseJson(req.body.toString('utf8'));
  if (!body.ok) return { ok: false, response: json(400, { error: `body is ${body.message}` }) };
  const parsed = schema.safeParse(body.value);
  if (parsed.success) return { ok: true, value: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, response: json(400, { error: `bad ${what}: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}` }) };
}
