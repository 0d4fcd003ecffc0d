/**
 * Starts the runner: the BullMQ worker executing runs with the configured
 * runner plugin (the local agent by default), the control listener, and
 * delivery through the channels' outbound sides.
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AppContext, Stoppable } from '../src/app-context.js';
import { ConfigError } from '../src/errors.js';
import type { SteerbotConfig } from '../src/config.js';
import { Runs } from '../src/protocol/runs.js';
import { ConversationState } from '../src/protocol/state.js';
import { RunQueue } from '../src/run-queue.js';
import { createLocalAgentPlugin, type LocalAgentConfig } from '../plugins/local-agent/index.js';
import { modelFromSettings } from '../plugins/local-agent/model.js';
import { createChannels, outboundResolver } from '../host/channels.js';
import type { CompactionSettings } from './compaction-hooks.js';
import { ControlListener } from './control.js';
import type { OutboundResolver } from './delivery.js';
import { RunExecutor } from './executor.js';
import type { ModelSettings, RunnerPlugin } from './plugin.js';
import { RunWorker, workerIdentity } from './worker.js';

/** Extra options of `startRunner` (tests and embedding). */
export interface RunnerExtras {
  /** The runner plugin. Default: the local agent built from `config.model`. */
  plugin?: RunnerPlugin;
  /** Channel outbound sides for delivery. Default: the outbound sides of the channels in `config.channels`, by conversation id prefix. */
  resolveOutbound?: OutboundResolver;
  /** `fetch` given to the channels created from config (platform API calls). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** BullMQ lock / stalled-check timings, in ms (tests shorten them). */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** Compaction settings. Default: summaries written by the model built from `config.model` (the local agent's model), default threshold and kept turns. */
  compaction?: CompactionSettings;
}

/** A started runner, with its parts exposed for tests. */
export interface StartedRunner extends Stoppable {
  executor: RunExecutor;
  worker: RunWorker;
  owner: string;
  /** Stops with a grace period; reports how many runs were aborted in flight. */
  close(graceMs?: number): Promise<{ abortedInFlight: number }>;
}

/** Starts the runner. `stop()` gives active runs `config.runner.shutdownGraceMs` before aborting them. */
export async function startRunner(ctx: AppContext, extras: RunnerExtras = {}): Promise<StartedRunner> {
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  const protocolOpts = { client: ctx.redis, prefix, leaseMs: config.runs.leaseMs };
  const runs = new Runs(protocolOpts);
  const state = new ConversationState(protocolOpts);
  const queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-runner-queue' });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName });
  const subscriber = ctx.connectRedis({ connectionName: 'steerbot-control' }) as Redis;
  const control = new ControlListener(subscriber, prefix, logger);
  await control.start();
  const owner = workerIdentity();
  const plugin = extras.plugin ?? createLocalAgentPlugin(localAgentConfig(config.agent));
  const compaction: CompactionSettings = {
    threshold: config.compaction.threshold,
    keepRecentTurns: config.compaction.keepRecentTurns,
    maxSummaryChars: config.compaction.maxSummaryChars,
    ...(extras.compaction ?? (await defaultCompaction(config.model, logger))),
  };
  // Runners use only the channels' outbound sides: the plugins are created, never started.
  const channels = extras.resolveOutbound ? [] : createChannels(config, { logger, redis: ctx.redis, prefix, ...(extras.fetch && { fetch: extras.fetch }) });
  const executor = new RunExecutor({
    client: ctx.redis,
    prefix,
    runs,
    state,
    plugin,
    control,
    enqueue: (c, r) => queue.enqueue(c, r),
    resolveOutbound: extras.resolveOutbound ?? outboundResolver(channels),
    logger: logger.child({ part: 'runner' }),
    owner,
    leaseMs: config.runs.leaseMs,
    heartbeatMs: config.runs.heartbeatMs,
    model: config.model,
    compaction,
    historyTailEntries: config.compaction.tailEntries,
    outboxTtlSeconds: config.runner.outboxTtlSeconds,
    steeringMode: config.agent.steeringMode,
  });
  const workerConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-runner-worker' });
  const worker = new RunWorker({
    executor,
    connection: workerConn,
    queueName: config.runs.queueName,
    concurrency: config.runner.concurrency,
    logger,
    ...(extras.lockDurationMs !== undefined && { lockDurationMs: extras.lockDurationMs }),
    ...(extras.stalledIntervalMs !== undefined && { stalledIntervalMs: extras.stalledIntervalMs }),
  });
  logger.info({ owner, plugin: plugin.manifest.name, concurrency: config.runner.concurrency }, 'runner started');
  let closed: Promise<{ abortedInFlight: number }> | undefined;
  const close = (graceMs = config.runner.shutdownGraceMs) =>
    (closed ??= (async () => {
      const report = await worker.close(graceMs);
      logger.info(report, 'runner stopped');
      await control.close();
      await queue.close();
      await Promise.all(channels.map((c) => c.stop().catch(() => undefined)));
      workerConn.disconnect();
      queueConn.disconnect();
      return report;
    })());
  return { executor, worker, owner, close, stop: async () => void (await close()) };
}

/** The summarizer is the model the local agent builds from config; without a usable one, summaries are the deterministic fallback. */
async function defaultCompaction(settings: ModelSettings, logger: Logger): Promise<CompactionSettings> {
  try {
    return { model: await modelFromSettings(settings) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    logger.warn(
      { err },
      'no usable model in config.model (set OPENAI_BASE_URL, OPENAI_API_KEY and STEERBOT_MODEL): runs of the default agent will answer with a failure message, and compaction writes deterministic summaries',
    );
    return {};
  }
}

/** The default agent's settings from the `agent` config section. */
export function localAgentConfig(agent: SteerbotConfig['agent']): LocalAgentConfig {
  return {
    ...(agent.systemPrompt !== undefined && { system: agent.systemPrompt }),
    streaming: agent.streaming,
    builtins: { currentTime: agent.currentTime, httpFetch: agent.httpFetch },
    steeringMode: agent.steeringMode,
    maxSteps: agent.maxSteps,
  };
}
