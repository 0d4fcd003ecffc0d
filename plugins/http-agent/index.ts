/**
 * Bring your own agent: a runner plugin that drives an external agent
 * service over HTTP (protocol `steerbot.agent/1`, docs/external-agents.md).
 * Each run invocation is a signed POST answered with an NDJSON event stream;
 * the agent pulls steering at its turn boundaries through run endpoints this
 * runner serves, fenced to the invocation.
 */
import type { Logger } from 'pino';
import { createHttpClient, type HttpRequest, type RouteRegistry } from 'steerbot/plugin';
import { defineRunnerPlugin, type RunnerPlugin } from 'steerbot/runner';
import { type HttpAgentConfig, httpAgentConfigSchema } from './config.js';
import { RunEndpoints } from './endpoints.js';
import { AgentInvocation } from './invocation.js';

export { type HttpAgentConfig, type HttpAgentConfigInput, httpAgentConfigSchema } from './config.js';

/** What the plugin needs besides its settings. */
export interface HttpAgentOptions {
  /** Where the run endpoints are served. Without it the agent cannot pull steering, and the manifest declares none (messages sent mid-run are collected for a successor run). */
  routes?: RouteRegistry;
  /** The server's own address once it listens (used when `publicUrl` is not set). */
  serverUrl?: () => string | undefined;
  /** Sends the requests to the agent. Default: a keep-alive connection pool of the plugin's own (`createHttpClient`), closed by `close()`. */
  request?: HttpRequest;
  logger?: Logger;
}

/** A listen address as others reach it: a wildcard host becomes the loopback address. */
function reachable(address: string): string {
  return address.replace('://0.0.0.0', '://127.0.0.1').replace('://[::]', '://[::1]');
}

/** Creates the http-agent runner plugin. */
export function createHttpAgentPlugin(config: HttpAgentConfig, opts: HttpAgentOptions = {}): RunnerPlugin {
  const endpoints = opts.routes ? new RunEndpoints() : undefined;
  if (endpoints) for (const route of endpoints.routes()) opts.routes!.add(route);
  const pool = opts.request ? undefined : createHttpClient();
  const request = opts.request ?? pool!.request;
  let warned = false;
  const baseUrl = (): string | undefined => {
    const found = config.publicUrl ?? (opts.serverUrl?.() !== undefined ? reachable(opts.serverUrl()!) : undefined);
    if (found === undefined && endpoints && !warned) {
      warned = true;
      opts.logger?.warn('http-agent: no publicUrl and the server does not listen yet: agents get no run capability (no steering)');
    }
    return found;
  };
  return {
    manifest: { name: 'http-agent', version: '0.1.0', capabilities: { steering: endpoints !== undefined, state: true }, steeringMode: config.steeringMode },
    async run(ctx) {
      const base = endpoints ? baseUrl() : undefined;
      const url = base === undefined ? undefined : RunEndpoints.urlOf(base, ctx.run.id);
      const invocation = new AgentInvocation(ctx, config, request, url);
      const close = endpoints?.open(ctx.run.id, invocation);
      try {
        return await invocation.run();
      } finally {
        close?.();
      }
    },
    async close() {
      pool?.close();
    },
  };
}

/** The http-agent runner plugin: an external agent service over HTTP, with steering. */
export default defineRunnerPlugin({
  id: 'http-agent',
  kind: 'runner',
  description: 'Drives an external agent service over HTTP (signed requests, NDJSON events), with steering through run endpoints.',
  configSchema: httpAgentConfigSchema,
  env: [
    { env: 'STEERBOT_AGENT_URL', path: 'url', kind: 'string' },
    { env: 'STEERBOT_AGENT_SECRET', path: 'secret', kind: 'string', secret: true },
    { env: 'STEERBOT_AGENT_PUBLIC_URL', path: 'publicUrl', kind: 'string' },
    { env: 'STEERBOT_AGENT_CONNECT_TIMEOUT_MS', path: 'connectTimeoutMs', kind: 'int' },
    { env: 'STEERBOT_AGENT_FIRST_EVENT_TIMEOUT_MS', path: 'firstEventTimeoutMs', kind: 'int' },
    { env: 'STEERBOT_AGENT_IDLE_TIMEOUT_MS', path: 'idleTimeoutMs', kind: 'int' },
    { env: 'STEERBOT_AGENT_MAX_EVENT_BYTES', path: 'maxEventBytes', kind: 'int' },
    { env: 'STEERBOT_AGENT_MAX_MESSAGE_CHARS', path: 'maxMessageChars', kind: 'int' },
    { env: 'STEERBOT_AGENT_MAX_STATE_BYTES', path: 'maxStateBytes', kind: 'int' },
    { env: 'STEERBOT_AGENT_STEERING_MODE', path: 'steeringMode', kind: 'string' },
  ],
  create: (settings, deps) =>
    createHttpAgentPlugin(settings, {
      logger: deps.logger,
      ...(deps.routes && { routes: deps.routes }),
      ...(deps.serverUrl && { serverUrl: deps.serverUrl }),
    }),
});
