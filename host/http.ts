/**
 * The host's HTTP server (Fastify 5): health and readiness probes, JSON
 * errors everywhere. Webhook routes are registered on it by the channels.
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { Readable } from 'node:stream';
import {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  fastify,
  LogController,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import type { CoreConfig } from '../src/config/load.js';
import { InvalidInputError, RedisUnavailableError } from '../src/errors.js';
import { sameToken } from '../src/http/access.js';
import { unmapIpv4 } from '../src/http/address-policy.js';
import type { HttpRoute, RouteRegistry, RouteRequest, RouteResponse } from '../src/http/routes.js';
import type { Logger } from '../src/logger.js';
import type { RedisClient } from '../src/redis/connection.js';
import { metrics as processMetrics, type SteerbotMetrics } from '../src/telemetry/metrics.js';
import { type ReadinessProbe, readinessReport } from '../src/telemetry/readiness.js';
import {
  type Attributes,
  type Context,
  context,
  contextFromTraceparent,
  failSpan,
  NON_RECORDING_SPAN,
  ROOT_CONTEXT,
  requestContext,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  tracer,
  tracingOn,
  UNSAMPLED_REQUEST_CONTEXT,
} from '../src/telemetry/tracing.js';

/** The Fastify instance the host serves. */
export type HttpServer = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, Logger>;

/** Options of `createHttpServer`. */
export interface CreateHttpServerOptions {
  /** Uses `http.bodyLimitBytes`. */
  config: Pick<CoreConfig, 'http'>;
  /** Probed by `/readyz`. */
  redis: RedisClient;
  /** Request logs go here. */
  logger: Logger;
  /** How long `/readyz` waits for PONG, in ms. Default 1000. */
  readyTimeoutMs?: number;
  /** Parts `/readyz` checks besides Redis (the runner's worker, the channels), read at each request. Default: none. */
  readiness?: () => readonly ReadinessProbe[];
  /** Served as `GET /metrics`; HTTP requests are counted in it. Default: the process's (`src/telemetry/metrics.ts`). */
  metrics?: SteerbotMetrics;
  /**
   * How long a response that is not an event stream may go with its client taking none of it (it stopped reading), in ms;
   * then its connection is closed and what the response held is let go. Default 60 000.
   */
  stalledResponseTimeoutMs?: number;
}

/** Default of `stalledResponseTimeoutMs`: a client that reads nothing for a minute is not coming back for the rest. */
const STALLED_RESPONSE_TIMEOUT_MS = 60_000;
/**
 * Largest piece a response's bytes are written in. A socket's timeout counts a write done only when all of it is: one
 * write of a whole file to a slow but reading client would look stalled.
 */
const RESPONSE_PIECE_BYTES = 64 * 1024;

/**
 * Closes `res`'s connection when its client takes none of it for `ms`. The timeout is the socket's, so the response hands
 * back the one it found when it finishes: before Node's own `finish` listener, which sets the keep-alive timeout, so a
 * next response on the connection (an event stream, which may be silent for long) is not timed by this one.
 */
function cutWhenStalled(res: ServerResponse, ms: number): void {
  const socket = res.socket;
  // No socket left (the client went away), or a simulated one (`inject`): nothing to time.
  if (typeof socket?.setTimeout !== 'function') return;
  const before = socket.timeout ?? 0;
  res.setTimeout(ms, () => res.destroy());
  res.prependOnceListener('finish', () => socket.setTimeout(before));
}

function* pieces(bytes: Buffer): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += RESPONSE_PIECE_BYTES) yield bytes.subarray(at, at + RESPONSE_PIECE_BYTES);
}

/** Answers true when Redis replies to PING within `timeoutMs`; never throws. */
async function redisAnswers(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, timeoutMs, false)));
  // The PING may outlive the timeout (offline queue); its late failure is expected and ignored.
  const ping = redis.ping().then(
    (r) => r === 'PONG',
    () => false,
  );
  try {
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Status and public message of an error: 4xx keep their message, 5xx say only what kind of failure it was. */
function describeError(err: FastifyError | Error): { status: number; error: string } {
  if (err instanceof RedisUnavailableError) return { status: 503, error: 'redis unreachable' };
  if (err instanceof InvalidInputError) return { status: 400, error: err.message };
  const status = 'statusCode' in err && typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
  if (status < 500) return { status, error: err.message };
  return { status, error: status === 503 ? 'service unavailable' : 'internal error' };
}

/** Builds the HTTP server with `/healthz` and `/readyz`; it is not listening yet (see `listen`). */
export function createHttpServer(opts: CreateHttpServerOptions): HttpServer {
  // How long a client has to send a whole request, headers and body; later it gets 408 and its connection is closed.
  const requestTimeoutMs = opts.config.http.requestTimeoutMs;
  const app = fastify({
    loggerInstance: opts.logger,
    bodyLimit: opts.config.http.bodyLimitBytes,
    // Fastify's default (0) lets a client that sends its body a byte at a time hold the connection and the
    // buffered body for ever. Only receiving the request counts: a response (an event stream) may last longer.
    requestTimeout: requestTimeoutMs,
    http: {
      // Node's own default (60 s) for the headers would outlast a shorter timeout.
      headersTimeout: Math.min(60_000, requestTimeoutMs),
      // Node looks at its open requests every 30 s by default: a quarter of the timeout keeps the overrun small.
      connectionsCheckingInterval: Math.min(30_000, Math.max(10, Math.ceil(requestTimeoutMs / 4))),
    },
    // Per-request "incoming request" / "request completed" lines cost every webhook call; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // Fastify's default makes a child logger per request; with the redaction paths that child
    // costs more than the rest of a bare request. Requests log through the server's logger and
    // name their request id where they log (the error handler below).
    childLoggerFactory: (logger) => logger,
  });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 1000;
  const stalledMs = opts.stalledResponseTimeoutMs ?? STALLED_RESPONSE_TIMEOUT_MS;
  // Bytes and text only: a streamed response is hijacked (event streams) and never passes here. One piece or less goes
  // to the socket's buffer in one write (a webhook's answer): nothing for a stalled client to hold, no timer to set.
  app.addHook('onSend', (_req, reply, payload, done) => {
    if ((typeof payload !== 'string' && !Buffer.isBuffer(payload)) || payload.length <= RESPONSE_PIECE_BYTES) return done(null, payload);
    cutWhenStalled(reply.raw, stalledMs);
    if (!Buffer.isBuffer(payload)) return done(null, payload);
    reply.header('content-length', payload.length);
    done(null, Readable.from(pieces(payload)));
  });

  app.setErrorHandler((err: FastifyError | Error, req, reply) => {
    const { status, error } = describeError(err);
    // Redis down: every request in the outage gets 503; the outage itself is logged once per process (watchRedis).
    if (err instanceof RedisUnavailableError)
      req.log.debug({ err, reqId: req.id, method: req.method, url: req.url.split('?')[0] }, 'request failed: redis unreachable');
    else if (status >= 500) req.log.error({ err, reqId: req.id, method: req.method, url: req.url.split('?')[0] }, 'request failed');
    return reply.status(status).send({ error });
  });
  app.setNotFoundHandler((req, reply) => reply.status(404).send({ error: `no route for ${req.method} ${req.url.split('?')[0]}` }));

  const metrics = opts.metrics ?? processMetrics;
  // Counted by route pattern, not path: one series per route, whatever the ids in the URL.
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    metrics.httpRequests.inc({ method: req.method, route, status: reply.statusCode });
    metrics.httpDuration.observe({ method: req.method, route }, reply.elapsedTime / 1000);
  });
  const redisProbe: ReadinessProbe = {
    name: 'redis',
    check: async () => ((await redisAnswers(opts.redis, readyTimeoutMs)) ? { ready: true } : { ready: false, detail: 'unreachable' }),
  };
  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async (_req, reply) => {
    const report = await readinessReport([redisProbe, ...(opts.readiness?.() ?? [])]);
    return report.ok ? { ok: true } : reply.status(503).send(report);
  });
  serveMetrics(app, metrics, opts.config.http.metricsToken);
  return app;
}

/**
 * `GET /metrics`. With `token` (`http.metricsToken`) only a request bearing it reads them; without one, only a
 * request from a loopback or private address (the scraper beside the process, on its network): they name the
 * models, tools, MCP servers and channels and show the traffic, and the host's port is the one platforms (and
 * strangers) reach. The address is the connection's own, never a forwarding header a client writes.
 */
function serveMetrics(app: HttpServer, metrics: SteerbotMetrics, token: string | undefined): void {
  app.get('/metrics', async (req, reply) => {
    const auth = req.headers.authorization;
    if (token !== undefined && !(auth?.startsWith('Bearer ') && sameToken(auth.slice('Bearer '.length), token)))
      return reply.status(401).header('www-authenticate', 'Bearer').send({ error: 'metrics need Authorization: Bearer <http.metricsToken>' });
    if (token === undefined && !isPrivateSource(req.socket.remoteAddress ?? ''))
      return reply.status(403).send({ error: 'metrics are served to private addresses only; set http.metricsToken to read them from elsewhere' });
    const { contentType, body } = await metrics.scrape();
    return reply.header('content-type', contentType).send(body);
  });
}

/**
 * Sources a connection may come from to read `/metrics` without a token: loopback, the private IPv4 ranges
 * (RFC 1918), link-local, and IPv6 unique-local and link-local (IPv4-mapped forms of these too). Unlike the
 * outbound guard's "not public", tunnel and translation ranges (Teredo, 6to4, NAT64) and shared address space
 * are not in it: inbound, they carry clients from anywhere.
 */
const PRIVATE_SOURCES = (() => {
  const list = new BlockList();
  list.addSubnet('127.0.0.0', 8, 'ipv4');
  for (const [net, bits] of [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['169.254.0.0', 16],
  ] as const)
    list.addSubnet(net, bits, 'ipv4');
  list.addAddress('::1', 'ipv6');
  list.addSubnet('fc00::', 7, 'ipv6');
  list.addSubnet('fe80::', 10, 'ipv6');
  return list;
})();

function isPrivateSource(ip: string): boolean {
  const a = unmapIpv4(ip);
  const family = isIP(a);
  return family !== 0 && PRIVATE_SOURCES.check(a, family === 4 ? 'ipv4' : 'ipv6');
}

/** Starts listening; resolves with the bound address, e.g. `http://127.0.0.1:8080`. */
export async function listen(app: HttpServer, at: { host: string; port: number }): Promise<string> {
  return app.listen({ host: at.host, port: at.port });
}

function firstValues(query: unknown): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries((query ?? {}) as Record<string, unknown>))
    out[k] = Array.isArray(v) ? String(v[0]) : typeof v === 'string' ? v : undefined;
  return out;
}

async function send(reply: FastifyReply, res: RouteResponse, signal: AbortSignal): Promise<unknown> {
  if ('onClose' in res && res.onClose) {
    if (reply.raw.closed) res.onClose();
    else reply.raw.once('close', res.onClose);
  }
  if ('stream' in res) {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(res.status, res.headers);
    try {
      for await (const chunk of res.stream) {
        if (signal.aborted) break;
        // An empty piece is the stream's chance to stop a long read (the client went away): nothing to send.
        if (chunk === '') continue;
        if (!raw.write(chunk)) await once(raw, 'drain', { signal }).catch(() => undefined);
      }
    } catch (err) {
      // The status line is out: a failing stream can only end early (the client reconnects with Last-Event-ID).
      reply.log.warn({ err, url: reply.request.url.split('?')[0] }, 'response stream failed; ended early');
    } finally {
      raw.end();
    }
    return reply;
  }
  if (res.headers) reply.headers(res.headers);
  reply.code(res.status);
  return 'json' in res ? reply.send(res.json) : reply.send(res.body ?? '');
}

/**
 * The route registry plugins use, served by `app`: every route gets its body
 * raw (signatures are computed over the bytes), whatever its content type.
 */
export function routeRegistry(app: HttpServer): RouteRegistry {
  const routes: HttpRoute[] = [];
  const open = new Set<AbortController>();
  // Open streams (server-sent events) would keep the server from closing: end them first.
  app.addHook('preClose', async () => {
    for (const ac of open) ac.abort();
  });
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    for (const route of routes.splice(0)) serve(scope, route, open);
    register = (route) => serve(scope, route, open); // throws once the server is ready, as Fastify does
  });
  let register: (route: HttpRoute) => void = (route) => routes.push(route);
  return { add: (route) => register(route) };
}

/** The options of every request span, shared: nothing is built per request for a span that is not sampled. */
const SERVER_SPAN: SpanOptions = { kind: SpanKind.SERVER };

/**
 * The parent of a request's span. A caller's W3C `traceparent` is continued only where the route trusts this
 * request's caller with it (`HttpRoute.trustsCallerTrace`); every other request starts a trace of its own, whatever
 * it carries: a stranger neither picks its trace id (to hide among or collide with other traces) nor its sampling
 * decision (to have every request recorded and exported under a ratio sampler). `tracestate` is never read.
 */
function parentContext(route: HttpRoute, request: RouteRequest, traceparent: unknown): Context | Promise<Context> {
  if (typeof traceparent !== 'string' || route.trustsCallerTrace === undefined) return ROOT_CONTEXT;
  const parent = (trusted: unknown) => (trusted === true ? contextFromTraceparent(traceparent) : ROOT_CONTEXT);
  try {
    const trusted = route.trustsCallerTrace(request);
    return trusted instanceof Promise ? trusted.then(parent, () => ROOT_CONTEXT) : parent(trusted);
  } catch {
    return ROOT_CONTEXT;
  }
}

/**
 * Runs `fn` inside the request's span (a child of `parent()`, see `parentContext`), marks it failed when `fn`
 * throws, ends it when `fn` settles. `attributes` (the route's, built once) are set only on a recorded span. Without
 * a tracing SDK nothing is started and `parent` is not asked; a request that is not sampled runs in one shared context
 * (see `UNSAMPLED_REQUEST_CONTEXT`): neither builds anything per request for tracing.
 */
function inRequestSpan<T>(name: string, attributes: Attributes, parent: () => Context | Promise<Context>, fn: (span: Span) => Promise<T>): Promise<T> {
  if (!tracingOn()) return fn(NON_RECORDING_SPAN);
  const ctx = parent();
  if (!(ctx instanceof Promise)) return inSpanUnder(name, SERVER_SPAN, attributes, ctx, fn);
  // The span starts once the route has said whether it trusts the caller; its time starts now.
  const options: SpanOptions = { kind: SpanKind.SERVER, startTime: performance.now() };
  return ctx.then((c) => inSpanUnder(name, options, attributes, c, fn));
}

function inSpanUnder<T>(name: string, options: SpanOptions, attributes: Attributes, ctx: Context, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(name, options, ctx);
  // Entered even when not sampled: the ingest under it follows the request's sampling decision instead of making its own.
  if (!span.isRecording()) return context.with(UNSAMPLED_REQUEST_CONTEXT, fn, undefined, NON_RECORDING_SPAN);
  return inRecordedSpan(span, attributes, ctx, fn);
}

async function inRecordedSpan<T>(span: Span, attributes: Attributes, ctx: Context, fn: (span: Span) => Promise<T>): Promise<T> {
  span.setAttributes(attributes);
  try {
    return await context.with(requestContext(ctx, span), fn, undefined, span);
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** The route's view of `req`, whose signal aborts when the client goes away before its response is done. */
function routeRequest(req: FastifyRequest, reply: FastifyReply, open: Set<AbortController>): RouteRequest {
  const ac = new AbortController();
  open.add(ac);
  reply.raw.on('close', () => {
    open.delete(ac);
    // Only a request that ended before its response did has anyone to stop (a handler still at work, an
    // event stream): an abort builds its DOMException reason, a cost every finished request would pay.
    if (!reply.raw.writableFinished) ac.abort();
  });
  return {
    method: req.method,
    path: req.url.split('?')[0] ?? req.url,
    params: (req.params ?? {}) as Record<string, string>,
    query: firstValues(req.query),
    headers: req.headers,
    body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    signal: ac.signal,
    ...(req.socket.remoteAddress !== undefined && { remoteAddress: req.socket.remoteAddress }),
  };
}

function serve(scope: FastifyInstance, route: HttpRoute, open: Set<AbortController>): void {
  const spanName = `${route.method} ${route.path}`;
  const routeAttributes: Attributes = { 'http.request.method': route.method, 'http.route': route.path };
  scope.route({
    method: route.method,
    url: route.path,
    ...(route.bodyLimitBytes !== undefined && { bodyLimit: route.bodyLimitBytes }),
    handler: (req: FastifyRequest, reply: FastifyReply) => {
      const request = routeRequest(req, reply, open);
      // The request's span (a trusted caller's W3C `traceparent` continues); an ingested message's attributes go on it (one span per request).
      return inRequestSpan(
        spanName,
        routeAttributes,
        () => parentContext(route, request, req.headers.traceparent),
        async (span) => {
          const res = await route.handle(request);
          if (span.isRecording()) {
            span.setAttribute('http.response.status_code', res.status);
            if (res.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
          }
          return send(reply, res, request.signal);
        },
      );
    },
  });
}
