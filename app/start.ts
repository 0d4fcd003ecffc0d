/**
 * Starts and stops one steerbot process: Redis, runner, host, HTTP ingress,
 * with the plugins the configuration selects. `cli.ts` wires it to signals;
 * tests and embedders drive it directly.
 */
import { once } from 'node:events';
import { resolve } from 'node:path';
import type { RedisClient } from 'steerbot/plugin';
import { createHttpServer, listen, routeRegistry } from '../host/http.js';
import { type HostContext, type HostParts, type StartedHost, startHost } from '../host/main.js';
import type { Purge, PurgeRequest } from '../host/purge.js';
import { discoverContextWindows } from '../runner/context-window.js';
import { MessageSender } from '../runner/delivery/send-message.js';
import { type RunnerParts, type StartedRunner, startRunner } from '../runner/main.js';
import { createModel } from '../runner/model.js';
import type { RunnerPlugin, RunnerPluginDeps } from '../runner/plugin.js';
import type { AppContext, Stoppable } from '../src/app-context.js';
import { type ChannelDeps, type ChannelOutbound, type ChannelPlugin, outboundResolver } from '../src/channel.js';
import { declareSecrets } from '../src/config/secrets.js';
import { generateLoginSecret, operatorAccess, type PageAccess } from '../src/http/access.js';
import { createLogger, type Logger, pluginRedactPaths, secretValues } from '../src/logger.js';
import { declaredConversationKeys } from '../src/plugin/storage.js';
import type { PurgeResult } from '../src/protocol/purge.js';
import {
  closeRedis,
  createRedis,
  INGRESS_COMMAND_TIMEOUT_MS,
  MIN_REDIS_VERSION,
  redisFromConfig,
  redisOptionsFromConfig,
  redisSummary,
  requireRedisVersion,
  watchRedis,
} from '../src/redis/connection.js';
import { ensureRedis } from '../src/redis/local.js';
import { metrics } from '../src/telemetry/metrics.js';
import type { ReadinessProbe } from '../src/telemetry/readiness.js';
import { BUILTIN_REGISTRY, declareConfigSecrets, type SteerbotConfig } from './config.js';
import { configDeprecations, deprecationWarning } from './config-migration.js';
import { hostFeatures, runnerFeatures } from './features/index.js';
import { type AnyDefinition, type PluginRegistry, resolvePlugins } from './registry.js';
import { channelIds, loginLines, redactConfig } from './summary.js';
import { startTracing } from './telemetry.js';

/** Starts one part of the process. */
export type StartHook<C, P> = (ctx: C, parts: P) => Promise<Stoppable>;

/** Options of `startApp`. */
export interface StartAppOptions {
  /** The validated configuration (`loadConfig`). */
  config: SteerbotConfig;
  /** Default: a logger at `config.log.level` on stdout. */
  logger?: Logger;
  /** Data directory of a private Redis started when none is configured or found. Default `./.steerbot/redis`. */
  dataDir?: string;
  /** The plugins. Default: the built-ins plus the modules `config.plugins` and `config.runner.plugin` name. */
  registry?: PluginRegistry;
  /** `fetch` for the channels' platform calls and the model provider (proxies, tests). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * Replace how the host / runner start (tests). Default: `startHost` / `startRunner`.
   * @internal
   */
  hooks?: { startHost?: StartHook<HostContext, HostParts>; startRunner?: StartHook<AppContext, RunnerParts> };
  /**
   * Where the one-time login link goes when no console token is configured (the secret is in it). Default:
   * straight to stderr, never through the logger, so it stays out of log collection (stdout carries the JSON logs).
   */
  printLogin?: (text: string) => void;
}

/** A started process. */
export interface RunningApp {
  /**
   * What host and runner were given (tests).
   * @internal
   */
  ctx: AppContext;
  /** The process's shared Redis command connection (`decideApproval`); closed by `stop()`. */
  redis: RedisClient;
  /**
   * Purges a conversation the way `/purge` and the console do: its keys in one atomic step, and every
   * feature's and channel's purge hook (its subagents' children, its schedules, a channel's keys elsewhere).
   * The one way to purge from code. Throws in a process that runs no host (`host.enabled` false).
   */
  purge(conversationId: string, request?: PurgeRequest): Promise<PurgeResult>;
  /** Where the HTTP server listens, e.g. `http://127.0.0.1:8080`; undefined when the host is disabled. */
  address: string | undefined;
  /** Ids of the configured channels, e.g. `['telegram', 'webhook:crm']`. */
  channels: string[];
  /** Where a runner-only process serves `/healthz`, `/readyz` and `/metrics` (on `http.host` / `http.port`); undefined with a host (its server serves them). */
  probeAddress?: string | undefined;
  /**
   * Records and delivers messages from outside a run (`sendMessage`), through the channels this process created.
   * @internal
   */
  sender: MessageSender;
  /** Stops ingress, then the host, then the runner (bounded by its grace), then Redis. Safe to call twice. */
  stop(): Promise<void>;
}

// Slack on top of the runner's own grace before shutdown stops waiting for it.
const RUNNER_STOP_SLACK_MS = 5000;

/** Resolves when `promise` settles or after `ms`, whichever is first; true when it settled in time. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((r) => (timer = setTimeout(r, ms, false)));
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Creates the configured channel instances (not started). */
export async function createChannels(
  config: Pick<SteerbotConfig, 'channels'>,
  deps: ChannelDeps,
  registry: PluginRegistry = BUILTIN_REGISTRY,
): Promise<ChannelPlugin[]> {
  const out: ChannelPlugin[] = [];
  for (const [id, def] of registry.channels) {
    const section = config.channels[id];
    if (section === undefined) continue;
    const created = await def.create(section, deps);
    out.push(...(Array.isArray(created) ? created : [created]));
  }
  return out;
}

/** Creates the selected runner plugin from its settings. */
async function createRunnerPlugin(
  config: SteerbotConfig,
  registry: PluginRegistry,
  id: string,
  logger: Logger,
  fetchImpl?: typeof fetch,
  served: Pick<RunnerPluginDeps, 'routes' | 'serverUrl'> = {},
): Promise<RunnerPlugin> {
  const def = registry.runners.get(id);
  if (!def) throw new Error(`runner plugin ${id} is not registered`);
  return def.create(config.agents[id] ?? {}, {
    logger: logger.child({ plugin: id }),
    model: config.model,
    ...(fetchImpl && { fetch: fetchImpl }),
    createModel: (settings = config.model) => createModel(settings, fetchImpl),
    profiles: config.profiles,
    ...served,
  });
}

/** A private redis-server is for one all-in-one process on a developer machine; anything else must share one Redis. */
function privateRedisRefusal(config: SteerbotConfig): string | undefined {
  const split = !config.host.enabled || !config.runner.enabled;
  if (!split && process.env.NODE_ENV !== 'production') return undefined;
  const why = split ? 'a host-only or runner-only process' : 'NODE_ENV=production';
  return `${why} does not start a Redis of its own: set REDIS_URL to the Redis every steerbot process shares (processes with their own Redis would each dedupe and queue alone)`;
}

/** One step of a process's shutdown. */
interface StopStep {
  name: string;
  run: () => Promise<void>;
}

/** The shutdown steps, added as parts start, and the stop that runs them once, in reverse start order (ingress, host, runner, Redis client, private Redis). */
function shutdownSteps(logger: Logger): { stops: StopStep[]; stop: () => Promise<void> } {
  const stops: StopStep[] = [];
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
  return { stops, stop };
}

/** Stops the runner within its grace (and a little slack); after that its runs are left to lease expiry. */
function runnerStop(runner: Stoppable, graceMs: number, logger: Logger): StopStep {
  const bound = graceMs + RUNNER_STOP_SLACK_MS;
  return {
    name: 'runner',
    run: async () => {
      if (!(await within(runner.stop(), bound))) logger.warn({ waitedMs: bound }, 'runner did not stop in time; leaving its runs to lease expiry');
    },
  };
}

/**
 * Starts the process. On a failure part-way, stops what already started and rethrows.
 * @throws Error from `ensureRedis` when no Redis can be found or started; ConfigError when a plugin refuses its settings.
 */
export async function startApp(opts: StartAppOptions): Promise<RunningApp> {
  const { registry, runnerId, logger, pluginKeys } = await preparePlugins(opts);
  // A runner's model windows the catalogue does not know are asked of the models' servers before anything starts
  // (the runner plugin is made with them); the runner then finds them known.
  const config = opts.config.runner.enabled ? await discoverContextWindows(opts.config, { logger, ...(opts.fetch && { fetch: opts.fetch }) }) : opts.config;
  const { stops, stop } = shutdownSteps(logger);
  let purge: Purge = async () => {
    throw new Error('purge runs on a host: this process runs the runner only (host.enabled is false)');
  };

  try {
    // First started, last stopped: spans of the shutdown itself are still exported.
    const tracing = startTracing({ logger });
    stops.push({ name: 'tracing', run: tracing.shutdown });
    metrics.withProcessMetrics(); // `process_*` / `nodejs_*` beside steerbot's own on /metrics
    // What `/readyz` checks besides Redis: the runner's worker and the channels' inbound sides, added as they start.
    const probes: ReadinessProbe[] = [];
    const { redisUrl, redisConnection, redis } = await openRedis(opts, logger, stops);
    logger.info({ redis: redisSummary(redisConnection), runner: config.runner.plugin }, 'steerbot starting');
    // Old scope keys were translated at load: each is named once, with its new key, until the file is migrated.
    for (const d of configDeprecations(config)) logger.warn({ oldKey: d.oldKey, newKey: d.newKey }, deprecationWarning(d));
    logger.debug({ config: redactConfig(config) }, 'effective configuration');

    const ctx: AppContext = {
      config,
      logger,
      redisUrl,
      redisConnection,
      redis,
      connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, ...(redisUrl === undefined ? {} : { url: redisUrl }) }),
    };
    const { login, generated } = operatorLogin(config);
    const channelDeps: ChannelDeps = { logger, redis, prefix: config.redis.prefix, operatorAccess: login, ...(opts.fetch && { fetch: opts.fetch }) };
    // Both roles need the runner plugin: the host reads its capabilities from the manifest.
    // The process's one HTTP server (the host's ingress, or a runner-only process's probes), created before the
    // runner plugin so the plugin can serve routes on it (http-agent's run endpoints); it listens last.
    const server = createHttpServer({ config, redis, logger, readiness: () => probes });
    let address: string | undefined;
    let probeAddress: string | undefined;
    const served = config.runner.enabled ? { routes: routeRegistry(server), serverUrl: () => address ?? probeAddress } : {};
    const plugin = await createRunnerPlugin(config, registry, runnerId, logger, opts.fetch, served);

    // Messages sent from outside a run go out through the outbound sides of one set of this process's channels.
    const { sender, useChannels } = await startSender(ctx, stops);

    if (config.runner.enabled) {
      // Runners use only the channels' outbound sides: instances of their own, never started.
      const runnerChannels = await createChannels(config, channelDeps, registry);
      useChannels(runnerChannels);
      const runner = await (opts.hooks?.startRunner ?? startRunner)(ctx, { plugin, channels: runnerChannels, pluginKeys, features: runnerFeatures() });
      if ('worker' in runner) probes.push(workerProbe(runner as StartedRunner));
      stops.push(runnerStop(runner, config.runner.shutdownGraceMs, logger));
    }

    if (config.host.enabled) {
      const http = server;
      const channels = await createChannels(config, channelDeps, registry);
      useChannels(channels);
      const host = await (opts.hooks?.startHost ?? startHost)({ ...ctx, http, operatorAccess: login }, hostParts(channels, plugin, pluginKeys, sender));
      purge = (host as Partial<StartedHost>).purge ?? purge;
      stops.push({ name: 'host', run: () => host.stop() });
      stops.push({ name: 'http', run: () => http.close() });
      for (const c of channels) if (c.ready) probes.push({ name: `channel:${c.id}`, check: () => c.ready!() });
      address = await listen(http, config.http);
      if (generated) printLoginLinks(opts, address, login.token, channels);
    }
    if (!config.host.enabled) {
      // A runner-only process has no ingress; it still answers probes and scrapes.
      const probeServer = server;
      stops.push({ name: 'probe server', run: () => probeServer.close() });
      probeAddress = await listen(probeServer, config.http);
      logger.info({ address: probeAddress }, 'runner probes and metrics served');
    }
    const channels = channelIds(config);
    logger.info({ address, host: config.host.enabled, runner: config.runner.enabled, channels }, 'steerbot started');
    return { ctx, redis, address, channels, probeAddress, sender, purge: (conversationId, request) => purge(conversationId, request), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** What the host starts with: its channels, the runner's steering capability, the features, the messages API's sender. */
function hostParts(channels: ChannelPlugin[], plugin: RunnerPlugin, pluginKeys: string[], sender: MessageSender): HostParts {
  return {
    channels,
    steeringCapable: plugin.manifest.capabilities.steering,
    pluginKeys,
    features: hostFeatures(),
    send: (req, { token, ...opts }) => sender.send(req, { token }, opts),
  };
}

/**
 * The operator's login (console and private pages): `host.console.token`, else a secret made for this start,
 * declared a secret so that no log line can carry it.
 */
function operatorLogin(config: SteerbotConfig): { login: PageAccess; generated: boolean } {
  const configured = config.host.console.token;
  const login = operatorAccess(configured ?? generateLoginSecret(), config.host.console.allowLoopback);
  if (configured === undefined) declareSecrets([login.token]);
  return { login, generated: configured === undefined };
}

/** Prints the one-time login link(s) of a generated secret straight to the terminal (`printLogin`), never to the logs. */
function printLoginLinks(opts: StartAppOptions, address: string, secret: string, channels: readonly ChannelPlugin[]): void {
  const chat = channels.some((c) => c.id === 'web');
  const lines = loginLines(opts.config, address, secret, chat);
  if (lines.length > 0) (opts.printLogin ?? ((text) => void process.stderr.write(text)))(`\n${lines.join('\n')}\n\n`);
}

/**
 * The sender of messages from outside a run (`sendMessage`, the messages API) on a connection of its own that
 * fails fast while Redis is down (503, not a request held for the outage); it sends through the channels
 * `useChannels` names first.
 */
async function startSender(ctx: AppContext, stops: StopStep[]) {
  const { config } = ctx;
  const conn = ctx.connectRedis({ failFastMs: INGRESS_COMMAND_TIMEOUT_MS, connectionName: 'steerbot-send' });
  stops.push({ name: 'send connection', run: async () => conn.disconnect() });
  // Without an offline queue, a command sent before the connection is ready fails: wait for it once.
  if (conn.status !== 'ready') await once(conn, 'ready');
  let resolveOutbound: ((conversationId: string) => ChannelOutbound | undefined) | undefined;
  const sender = new MessageSender({
    client: conn,
    prefix: config.redis.prefix,
    resolve: (conversationId) => resolveOutbound?.(conversationId),
    logger: ctx.logger.child({ part: 'send' }),
    dedupeTtlSeconds: config.dispatch.dedupeTtlSeconds,
    maxMessageChars: config.dispatch.maxMessageChars,
  });
  return { sender, useChannels: (channels: ChannelPlugin[]) => void (resolveOutbound ??= outboundResolver(channels)) };
}

/**
 * What the process needs of its plugins before anything starts: the registry, a logger that redacts what
 * they declare, and the conversation keys they own. Nothing is started yet: a module that cannot be loaded
 * throws ConfigError with nothing to stop.
 */
async function preparePlugins(opts: StartAppOptions): Promise<{ registry: PluginRegistry; runnerId: string; logger: Logger; pluginKeys: string[] }> {
  const { config } = opts;
  const { registry, runnerId } = opts.registry
    ? { registry: opts.registry, runnerId: config.runner.plugin }
    : await resolvePlugins({ modules: config.plugins, runner: config.runner.plugin });
  // A configuration built in code was never loaded: its plugins' secret settings are declared here.
  const secretPaths = declareConfigSecrets(config, registry, runnerId);
  const definitions = registryDefinitions(registry);
  const logger =
    opts.logger ??
    createLogger({
      level: config.log.level,
      secrets: secretValues(config),
      secretPaths,
      redactPaths: pluginRedactPaths(definitions),
    });
  return { registry, runnerId, logger, pluginKeys: declaredConversationKeys(definitions) };
}

/** Every definition of a registry, channels and runners. */
export function registryDefinitions(registry: PluginRegistry): AnyDefinition[] {
  return [...registry.channels.values(), ...registry.runners.values()];
}

/** `/readyz`'s check of the runner: its BullMQ worker takes jobs. */
function workerProbe(runner: StartedRunner): ReadinessProbe {
  return { name: 'runner.worker', check: () => (runner.worker.worker.isRunning() ? { ready: true } : { ready: false, detail: 'not running' }) };
}

/** The process's Redis client (after starting the private Redis in `single` mode when no URL is set); both are added to `stops`. */
async function openRedis(opts: StartAppOptions, logger: Logger, stops: StopStep[]) {
  const { config } = opts;
  let redisUrl: string | undefined;
  if (config.redis.mode === 'single') {
    const dataDir = resolve(opts.dataDir ?? '.steerbot/redis');
    const refusal = config.redis.url === undefined ? privateRedisRefusal(config) : undefined;
    const local = await ensureRedis({
      ...(config.redis.url !== undefined && { url: config.redis.url }),
      dataDir,
      persistent: true,
      logger,
      ...(refusal !== undefined && { refuseToStart: refusal }),
    });
    stops.push({ name: 'private redis', run: local.stop });
    redisUrl = local.url;
  }
  const redisConnection = redisOptionsFromConfig(config.redis, redisUrl === undefined ? {} : { url: redisUrl });
  const redis = createRedis(redisConnection);
  watchRedis(redis, logger); // one warning per outage, not one per reconnect attempt
  stops.push({ name: 'redis', run: () => closeRedis(redis) });
  if ((await requireRedisVersion(redis)) === undefined) {
    logger.warn(`could not read the Redis version (INFO refused or no answer); steerbot needs Redis ${MIN_REDIS_VERSION} or newer`);
  }
  return { redisUrl, redisConnection, redis };
}
