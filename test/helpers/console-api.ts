/**
 * The operator console's JSON API served over a harness's Redis, for the API
 * tests: `serveConsole` registers the console with the options a test adds
 * (access, memory, schedules, …) and `consoleCall` makes one request as the
 * console page does (bearer token; a POST is a same-origin JSON request).
 */
import { type ConsoleOptions, registerConsole } from '../../host/console/routes.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

export const CONSOLE_TOKEN = 'console-token-0123456789';

/** An HTTP server with the console registered on `h`'s Redis and queue, plus `extra` options; ready. */
export async function serveConsole(h: RunnerHarness, extra: Partial<ConsoleOptions> = {}): Promise<HttpServer> {
  const { ctx } = h;
  const http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger: ctx.logger });
  registerConsole({
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    dispatch: h.dispatch,
    queue: h.queue,
    logger: ctx.logger,
    token: CONSOLE_TOKEN,
    traceUrl: undefined,
    channelPolicy: () => undefined,
    enqueue: async () => undefined,
    ...extra,
  });
  await http.ready();
  return http;
}

/** One console API request (`path` under `/console/api`); a POST without a body sends `{}`. */
export async function consoleCall(
  http: HttpServer,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  token = CONSOLE_TOKEN,
): Promise<{ status: number; body: any }> {
  const payload = body ?? (method === 'POST' ? {} : undefined);
  const res = await http.inject({
    method,
    url: `/console/api${path}`,
    headers: { authorization: `Bearer ${token}`, ...(payload !== undefined && { 'content-type': 'application/json' }) },
    ...(payload !== undefined && { payload: JSON.stringify(payload) }),
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}
