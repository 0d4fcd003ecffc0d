/**
 * An AppContext for runner tests, built from environment-style settings so a
 * child process (`worker-process.ts`) builds exactly the one the test process
 * builds. No vitest imports: child processes load this file too.
 */

import { readConfig } from '../app/config.js';
import type { AppContext } from '../src/app-context.js';
import { createLogger } from '../src/logger.js';
import { closeRedis, createRedis, redisFromConfig } from '../src/redis/connection.js';

/** Settings of a test AppContext. */
export interface TestContextSettings {
  redisUrl: string;
  /** Key prefix of the test (also names the BullMQ queue). */
  prefix: string;
  /** Run lease, in ms. Default 1500. */
  leaseMs?: number;
  /** Heartbeat period, in ms. Default 300. */
  heartbeatMs?: number;
  /** Log level. Default `TEST_LOG_LEVEL` or `silent`. */
  logLevel?: string;
  /** Base URL of an OpenAI-compatible model (config `model.baseURL`). */
  modelBaseURL?: string;
  /** Follow-up runs a failed run's unanswered messages get (`runs.followUpsOnFailure`). Default: the configuration's default. */
  followUpsOnFailure?: number;
}

/** BullMQ queue name of a test: unique per prefix, so workers of other tests never see its jobs. */
export function queueNameFor(prefix: string): string {
  return `runs-${prefix}`;
}

/** The environment `loadConfig` reads for these settings (also what a child worker gets). */
export function contextEnv(s: TestContextSettings): Record<string, string> {
  return {
    REDIS_URL: s.redisUrl,
    STEERBOT_PREFIX: s.prefix,
    STEERBOT_LEASE_MS: String(s.leaseMs ?? 1500),
    STEERBOT_HEARTBEAT_MS: String(s.heartbeatMs ?? 300),
    STEERBOT_QUEUE_NAME: queueNameFor(s.prefix),
    STEERBOT_RUNNER_SHUTDOWN_GRACE_MS: '1000',
    LOG_LEVEL: s.logLevel ?? process.env.TEST_LOG_LEVEL ?? 'silent',
    STEERBOT_MODEL: 'm',
    STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'm' is not in the model catalogue
    OPENAI_API_KEY: 'k',
    ...(s.modelBaseURL && { OPENAI_BASE_URL: s.modelBaseURL }),
    ...(s.followUpsOnFailure !== undefined && { STEERBOT_FOLLOW_UPS_ON_FAILURE: String(s.followUpsOnFailure) }),
  };
}

/** Builds the AppContext; the caller closes it with `closeTestContext`. */
export function createTestContext(s: TestContextSettings): AppContext {
  const config = readConfig({ env: contextEnv(s) });
  const logger = createLogger({ level: config.log.level });
  const redisConnection = { url: s.redisUrl };
  const redis = createRedis(redisConnection);
  redis.on('error', (err: Error) => logger.warn({ err }, 'redis connection error'));
  return {
    config,
    logger,
    redisUrl: s.redisUrl,
    redisConnection,
    redis,
    connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, url: s.redisUrl }),
  };
}

/** Closes the context's shared connection. */
export async function closeTestContext(ctx: AppContext): Promise<void> {
  await closeRedis(ctx.redis);
}
