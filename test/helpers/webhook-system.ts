/**
 * The whole system as `npm start` builds it from environment settings (any
 * Redis mode): host with one signed webhook channel calling back to a local
 * receiver, runner with the local agent on the fake OpenAI-compatible server.
 * For the tests that run it against a Redis Cluster or through Sentinel.
 */

import { readConfig } from '../../app/config.js';
import { hostFeatures, runnerFeatures } from '../../app/features/index.js';
import { createChannels } from '../../app/start.js';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { type StartedHost, startHost } from '../../host/main.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolboxOptions } from '../../plugins/local-agent/toolbox.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { pendingKey } from '../../plugins/webhook/keys.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { type StartedRunner, startRunner } from '../../runner/main.js';
import type { AppContext } from '../../src/app-context.js';
import { createLogger } from '../../src/logger.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import { closeRedis, createRedis, redisFromConfig, redisOptionsFromConfig } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { waitFor } from '../../testing/wait.js';
import { testPrefix } from './redis.js';

export const WEBHOOK_SECRET = 'whsec-system-0123456789abcdef';
/** The channel id: conversations are `webhook:e2e:<name>`. */
export const CHANNEL = 'webhook:e2e';

/** The started parts of a system under test. */
export interface SystemParts {
  ctx: AppContext;
  prefix: string;
  http: HttpServer;
  host: StartedHost;
  runner: StartedRunner;
  url: string;
}

export interface WebhookSystem extends SystemParts {
  /** POSTs a signed message; `sender` defaults to Ann. */
  post(payload: Record<string, unknown>): Promise<{ status: number; body: Record<string, any> }>;
  /** The record of conversation `name`. */
  record(name: string): Promise<SeqEntry[]>;
  /** Waits until every stored reply has been called back. */
  drained(): Promise<void>;
  stop(): Promise<void>;
}

export interface WebhookSystemOptions {
  /** Redis settings as environment variables (REDIS_MODE, REDIS_CLUSTER_NODES, …). */
  redisEnv: Record<string, string>;
  modelBaseURL: string;
  callbackUrl: string;
  tools?: AgentTool[];
  /** The local agent's toolbox (MCP servers, policy, …). */
  toolbox?: ToolboxOptions;
  prefix?: string;
  /** Runs before host and runner start, with the context they will get. */
  prepare?: (ctx: AppContext) => Promise<void>;
}

export async function startWebhookSystem(o: WebhookSystemOptions): Promise<WebhookSystem> {
  const prefix = o.prefix ?? testPrefix();
  const base = readConfig({
    env: {
      ...o.redisEnv,
      STEERBOT_PREFIX: prefix,
      STEERBOT_QUEUE_NAME: `runs-${prefix}`,
      STEERBOT_LEASE_MS: '1500',
      STEERBOT_HEARTBEAT_MS: '300',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      STEERBOT_MODEL: 'm',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'm' is not in the model catalogue
      OPENAI_API_KEY: 'k',
      OPENAI_BASE_URL: o.modelBaseURL,
    },
  });
  const config = {
    ...base,
    channels: { webhooks: { e2e: webhookChannelConfigSchema.parse({ secret: WEBHOOK_SECRET, callbackUrl: o.callbackUrl, callbackRetryBaseMs: 10 }) } },
  };
  const logger = createLogger({ level: config.log.level });
  const redisConnection = redisOptionsFromConfig(config.redis, {});
  const ctx: AppContext = {
    config,
    logger,
    redisUrl: undefined,
    redisConnection,
    redis: createRedis(redisConnection),
    connectRedis: (c = {}) => redisFromConfig(config.redis, c),
  };
  ctx.redis.on('error', () => undefined); // failovers are expected in these tests; commands still report their errors
  await o.prepare?.(ctx);
  const http = createHttpServer({ config, redis: ctx.redis, logger });
  const channelDeps = { logger, redis: ctx.redis, prefix: config.redis.prefix };
  const host = await startHost({ ...ctx, http }, { channels: await createChannels(config, channelDeps), steeringCapable: true, features: hostFeatures() });
  const runner = await startRunner(ctx, {
    channels: await createChannels(config, channelDeps),
    plugin: createLocalAgentPlugin({ tools: o.tools ?? [], builtins: { currentTime: false }, ...(o.toolbox && { toolbox: o.toolbox }) }),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  return {
    ctx,
    prefix,
    http,
    host,
    runner,
    url,
    async post(payload) {
      const raw = JSON.stringify({ sender: { id: 'ann', name: 'Ann' }, ...payload });
      const res = await fetch(`${url}/webhooks/e2e`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) },
        body: raw,
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    },
    record: (name) => readRange(ctx.redis, conversationKeys(prefix, `${CHANNEL}:${name}`).log),
    drained: () =>
      waitFor(async () => (await ctx.redis.zcard(pendingKey(prefix, CHANNEL))) === 0 || undefined, 15_000, 'every reply called back').then(() => undefined),
    async stop() {
      await http.close();
      await runner.close(1000);
      await host.queue.queue.obliterate({ force: true });
      await host.stop();
      await closeRedis(ctx.redis);
    },
  };
}
