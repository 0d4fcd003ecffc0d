/**
 * Starts and stops one steerbot process: Redis, runner, host, HTTP ingress.
 * `cli.ts` wires it to signals; tests drive it directly.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AppContext, Stoppable } from './app-context.js';
import { configSummary, type SteerbotConfig } from './config.js';
import { ensureRedis } from './local-redis.js';
import { createLogger, type Logger } from './logger.js';
import { closeRedis, createRedis, redisFromConfig, redisOptionsFromConfig, redisSummary } from './redis.js';
import type { HostContext } from '../host/main.js';
import { createHttpServer, listen } from '../host/http.js';

/** Starts one part of the process. */
export type StartHook<C> = (ctx: C) => Promise<Stoppable>;

/** Options of `startApp`. */
export interface StartAppOptions {
  /** The validated configuration. */
  config: SteerbotConfig;
  /** Default: a logger at `config.log.level` on stdout. */
  logger?: Logger;
  /** Data directory of a private Redis started when none is configured or found. Default `./.steerbot/redis`. */
  dataDir?: string;
  /** Replace the host / runner entry modules (tests). Default: `host/main.ts` / `runner/main.ts` when present. */
  hooks?: { startHost?: StartHook<HostContext>; startRunner?: StartHook<AppContext> };
}

/** A started process. */
export interface RunningApp {
  /** What host and runner were given. */
  ctx: AppContext;
  /** Where the HTTP server listens, e.g. `http://127.0.0.1:8080`; undefined when the host is disabled. */
  address: string | undefined;
  /** Stops ingress, then the host, then the runner (bounded by its grace), then Redis. Safe to call twice. */
  stop(): Promise<void>;
}

// Slack on top of the runner's own grace before shutdown stops waiting for it.
const RUNNER_STOP_SLACK_MS = 5000;

/** Imports `startHost` / `startRunner` from its module if the module exists (they are optional parts). */
async function loadHook<C>(modulePath: string, name: string): Promise<StartHook<C> | undefined> {
  const base = fileURLToPath(new URL(modulePath, import.meta.url));
  if (!['.ts', '.js'].some((ext) => existsSync(base + ext))) return undefined;
  const mod = (await import(`${modulePath}.js`)) as Record<string, unknown>;
  const hook = mod[name];
  if (typeof hook !== 'function') throw new Error(`${modulePath} does not export a function ${name}`);
  return hook as StartHook<C>;
}

/** Resolves when `promise` settles or after `ms`, whichever is first; true when it settled in time. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => (timer = setTimeout(r, ms, false)));
  try {
    return await Promise.race([promise.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts the process. On a failure part-way, stops what already started and rethrows.
 * @throws Error from `ensureRedis` when no Redis can be found or started.
 */
export async function startApp(opts: StartAppOptions): Promise<RunningApp> {
  const { config } = opts;
  const logger = opts.logger ?? createLogger({ level: config.log.level });
  // Stop steps, run in reverse start order: ingress, host, runner, Redis client, private Redis.
  const stops: Array<{ name: string; run: () => Promise<void> }> = [];
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const step of stops.reverse()) {
        try {
          await step.run();
        } catch (err) {
          logger.error({ err, step: step.name }, 'shutdown step failed');
        }
      }
    })());

  try {
    let redisUrl: string | undefined;
    if (config.redis.mode === 'single') {
      const dataDir = resolve(opts.dataDir ?? '.steerbot/redis');
      const local = await ensureRedis({ url: config.redis.url, dataDir, persistent: true, logger });
      stops.push({ name: 'private redis', run: local.stop });
      redisUrl = local.url;
    }
    const redisConnection = redisOptionsFromConfig(config.redis, redisUrl === undefined ? {} : { url: redisUrl });
    const redis = createRedis(redisConnection);
    redis.on('error', (err: Error) => logger.warn({ err }, 'redis connection error'));
    stops.push({ name: 'redis', run: () => closeRedis(redis) });
    logger.info({ config: configSummary(config), redis: redisSummary(redisConnection) }, 'steerbot starting');

    const ctx: AppContext = {
      config,
      logger,
      redisUrl,
      redisConnection,
      redis,
      connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, ...(redisUrl === undefined ? {} : { url: redisUrl }) }),
    };

    if (config.runner.enabled) {
      const startRunner = opts.hooks?.startRunner ?? (await loadHook<AppContext>('../runner/main', 'startRunner'));
      if (startRunner) {
        const runner = await startRunner(ctx);
        const bound = config.runner.shutdownGraceMs + RUNNER_STOP_SLACK_MS;
        stops.push({
          name: 'runner',
          run: async () => {
            if (!(await within(runner.stop(), bound))) logger.warn({ waitedMs: bound }, 'runner did not stop in time; leaving its runs to lease expiry');
          },
        });
      }
    }

    let address: string | undefined;
    if (config.host.enabled) {
      const http = createHttpServer({ config, redis, logger });
      const startHost = opts.hooks?.startHost ?? (await loadHook<HostContext>('../host/main', 'startHost'));
      if (startHost) {
        const host = await startHost({ ...ctx, http });
        stops.push({ name: 'host', run: () => host.stop() });
      }
      stops.push({ name: 'http', run: () => http.close() });
      address = await listen(http, config.http);
    }
    logger.info({ address, host: config.host.enabled, runner: config.runner.enabled }, 'steerbot started');
    return { ctx, address, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
