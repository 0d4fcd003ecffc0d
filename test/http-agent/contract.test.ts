/**
 * The http-agent plugin passes the runner plugin contract, driving the
 * example agent (examples/http-agent/agent.js) for real: once with its run
 * endpoints served (steering; the agent answers with the contract's fake
 * model, so a stop must reach the agent's own model call), and once given as
 * a bare definition with no server (no steering: messages sent mid-run are
 * collected for a successor run).
 */
import { fastify } from 'fastify';
import { afterAll, afterEach } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { listen, routeRegistry } from '../../host/http.js';
import httpAgent, { createHttpAgentPlugin, httpAgentConfigSchema } from '../../plugins/http-agent/index.js';
import { createLogger } from '../../src/logger.js';
import { runnerPluginContract } from '../../testing/runner-contract.js';
import { redisUrl } from '../helpers/redis.js';
import { SECRET } from './helpers.js';

type Agent = { url: string; close(): Promise<void> };
const { startAgent } = (await import('../../examples/http-agent/agent.js')) as { startAgent(o: Record<string, unknown>): Promise<Agent> };

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

runnerPluginContract({
  name: 'http-agent driving examples/http-agent with run endpoints',
  redisUrl: redisUrl(),
  async makePlugin({ modelBaseURL }) {
    const agent = await startAgent({ secret: SECRET, model: { baseURL: modelBaseURL, apiKey: 'contract-key', name: 'contract-model' } });
    const server = fastify({ loggerInstance: createLogger({ level: 'silent' }) }) as unknown as HttpServer;
    let address: string | undefined;
    const plugin = createHttpAgentPlugin(httpAgentConfigSchema.parse({ url: agent.url, secret: SECRET }), {
      routes: routeRegistry(server),
      serverUrl: () => address,
    });
    address = await listen(server, { host: '127.0.0.1', port: 0 });
    opened.push(
      () => agent.close(),
      () => server.close(),
    );
    return plugin;
  },
});

// A definition's `create` without a server: the agent echoes (it has no model here).
const echoing = await startAgent({ secret: SECRET });
afterAll(() => echoing.close());
runnerPluginContract({
  name: 'http-agent as a definition, without run endpoints',
  definition: httpAgent,
  config: { url: echoing.url, secret: SECRET },
  redisUrl: redisUrl(),
});
