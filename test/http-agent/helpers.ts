/**
 * Test rigs for the http-agent runner plugin: a scripted agent server (the
 * test writes its NDJSON by hand, to produce any behaviour, good or bad),
 * and a runner harness whose plugin serves its run endpoints on a real
 * Fastify server.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { createHttpAgentPlugin, type HttpAgentConfigInput, httpAgentConfigSchema } from '../../plugins/http-agent/index.js';
import type { RunRequest } from '../../plugins/http-agent/protocol.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { checkSignature } from '../../src/http/signature.js';
import { PluginProbe } from '../../testing/runner-contract.js';
import { RunnerHarness } from '../../testing/runner-harness.js';

export const SECRET = 'agent-secret-0123456789abcdef';

/** One request the scripted agent received. */
export interface AgentRequest {
  body: any;
  headers: IncomingMessage['headers'];
  /** Why the signature was refused, or undefined when it checked out. */
  signatureProblem: string | undefined;
}

/** What a script gets for one run request. */
export interface RunTools {
  /** Writes the status line and headers (200, NDJSON, unless told otherwise). */
  start(status?: number, contentType?: string): void;
  /** Writes one event as a line and counts it. */
  send(event: unknown): void;
  /** Writes raw text (malformed lines, blank keep-alives). */
  raw(text: string): void;
  /** Events written so far. */
  readonly eventsSent: number;
  /** POSTs to the run's steering endpoint with the capability's token (or `token`). */
  pull(mode?: 'all' | 'one', opts?: { token?: string; eventsSent?: number }): Promise<{ status: number; body: any }>;
  /** Resolves when the runner closes the stream (or the response ends). */
  closed: Promise<void>;
  /** Aborted when the stream closes. */
  signal: AbortSignal;
}

/** A scripted agent server. */
export interface ScriptedAgent {
  url: string;
  requests: AgentRequest[];
  /** Bodies of the run requests. */
  runs(): RunRequest[];
  /** Bodies of the cancel requests. */
  cancels(): any[];
  /** TCP connections the runner opened to the agent so far. */
  connections(): number;
  close(): Promise<void>;
}

/** POSTs a steering pull for a capability. */
export async function pullSteering(
  capability: { url: string; token: string },
  body: unknown,
  token = capability.token,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${capability.url}/steering`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** Starts an agent whose run requests are answered by `script` (the response ends when it returns). */
export async function startScriptedAgent(script: (run: RunRequest, t: RunTools) => Promise<void> | void): Promise<ScriptedAgent> {
  const requests: AgentRequest[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      const body = JSON.parse(raw.toString('utf8'));
      requests.push({ body, headers: req.headers, signatureProblem: checkSignature(SECRET, req.headers, raw, Math.floor(Date.now() / 1000), 300) });
      if (body.type !== 'run') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        return;
      }
      const ac = new AbortController();
      const closed = new Promise<void>((resolve) =>
        res.on('close', () => {
          ac.abort();
          resolve();
        }),
      );
      let eventsSent = 0;
      const run = body as RunRequest;
      const t: RunTools = {
        start: (status = 200, contentType = 'application/x-ndjson') => void res.writeHead(status, { 'content-type': contentType }).flushHeaders(),
        send: (event) => {
          res.write(`${JSON.stringify(event)}\n`);
          eventsSent++;
        },
        raw: (text) => void res.write(text),
        get eventsSent() {
          return eventsSent;
        },
        pull: (mode = 'all', opts = {}) => pullSteering(run.capability!, { mode, eventsSent: opts.eventsSent ?? eventsSent }, opts.token),
        closed,
        signal: ac.signal,
      };
      try {
        await script(run, t);
      } catch {
        // a script ends early when the runner closes the stream
      } finally {
        res.end();
      }
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/agent`,
    connections: () => connections,
    requests,
    runs: () => requests.filter((r) => r.body.type === 'run').map((r) => r.body as RunRequest),
    cancels: () => requests.filter((r) => r.body.type === 'cancel').map((r) => r.body),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A runner harness running the http-agent plugin (wrapped in a probe) with its run endpoints on a real server. */
export interface AgentRig {
  h: RunnerHarness;
  probe: PluginProbe;
  plugin: RunnerPlugin;
  server: HttpServer;
  /** Where the run endpoints are served. */
  address: string;
  close(): Promise<void>;
}

/**
 * Starts the rig; `settings` are the plugin's (`url` at least; the secret defaults to SECRET).
 * `followUpsOnFailure`: the runner's `runs.followUpsOnFailure` (default: the configured default).
 */
export async function startRig(
  settings: Partial<HttpAgentConfigInput> & { url: string },
  opts: { onRequest?: (url: string) => void; followUpsOnFailure?: number } = {},
): Promise<AgentRig> {
  const h = await RunnerHarness.start(opts.followUpsOnFailure === undefined ? {} : { followUpsOnFailure: opts.followUpsOnFailure });
  const server = createHttpServer({ config: h.ctx.config, redis: h.ctx.redis, logger: h.ctx.logger });
  const { onRequest } = opts;
  if (onRequest) server.addHook('onRequest', async (req) => onRequest(req.url));
  let address: string | undefined;
  const plugin = createHttpAgentPlugin(httpAgentConfigSchema.parse({ secret: SECRET, ...settings }), {
    routes: routeRegistry(server),
    serverUrl: () => address,
    logger: h.ctx.logger,
  });
  address = await listen(server, { host: '127.0.0.1', port: 0 });
  const probe = new PluginProbe(plugin);
  await h.startRunner(probe);
  return {
    h,
    probe,
    plugin,
    server,
    address,
    close: async () => {
      await h.close();
      await server.close();
    },
  };
}
