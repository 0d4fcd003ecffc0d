/**
 * Starts the runner: the BullMQ worker executing runs with the runner plugin
 * it is given, the control listener, and delivery through the channels'
 * outbound sides.
 */

import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AppContext, Stoppable } from '../src/app-context.js';
import type { ChannelPlugin } from '../src/channel.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { ConfigError } from '../src/errors.js';
import { IdentityStore } from '../src/people/identity.js';
import { dispatchFromConfig } from '../src/protocol/dispatch-config.js';
import { retentionOptions } from '../src/protocol/retention.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import { Runs } from '../src/protocol/runs.js';
import { ConversationState } from '../src/protocol/state.js';
import { runChannels } from './channels.js';
import type { CompactionSettings } from './compaction/hooks.js';
import { discoverContextWindows } from './context-window.js';
import type { OutboundResolver } from './delivery/sink.js';
import type { RunnerFeature, RunnerFeatureFactory, RunnerFeatureKit } from './feature.js';
import { createModel } from './model.js';
import type { ModelSettings, RunnerPlugin } from './plugin.js';
import { ControlListener } from './run/control.js';
import { DEFAULT_FAILURE_MESSAGE, RunExecutor } from './run/executor.js';
import type { RunSettings } from './run/options.js';
import { RunWorker, workerIdentity } from './worker.js';

/** What the composition gives the runner besides the context. */
export interface RunnerParts {
  /** The runner plugin. */
  plugin: RunnerPlugin;
  /**
   * Channels to deliver through (created, never started: only their outbound sides are used). Stopped with the runner.
   * Their ids also say which conversations a channel-wide heartbeat covers: without `channels`, fires never cancel a stale heartbeat.
   */
  channels?: ChannelPlugin[];
  /** Finds a conversation's outbound side. Default: by channel id among `channels`. */
  resolveOutbound?: OutboundResolver;
  /** BullMQ lock / stalled-check timings, in ms (tests shorten them). */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** Suffixes of the conversation keys plugins declare (`declaredConversationKeys`): idle retention expires them. Default: none. */
  pluginKeys?: readonly string[];
  /** Compaction settings. Default: summaries written by the model built from `config.model` by the runner's model factory. */
  compaction?: CompactionSettings;
  /** The runner features' factories, in order (app/features: `runnerFeatures()`); made once the runner's services are. */
  features: readonly RunnerFeatureFactory[];
  /** The features' clock, ms since the epoch (budget windows; tests move it). Default `Date.now`. */
  now?: () => number;
}

/** A started runner, with its parts exposed for tests. */
export interface StartedRunner extends Stoppable {
  executor: RunExecutor;
  worker: RunWorker;
  owner: string;
  /** Stops with a grace period; reports how many runs were aborted in flight. */
  close(graceMs?: number): Promise<{ abortedInFlight: number }>;
}

/** The compaction settings of `config.compaction`, with the summarizer given or the default one on the configured model. */
function compactionSettings(ctx: AppContext, extras: RunnerParts): CompactionSettings {
  const { compaction } = ctx.config;
  return {
    threshold: compaction.threshold,
    keepRecentTurns: compaction.keepRecentTurns,
    maxSummaryChars: compaction.maxSummaryChars,
    ...(extras.compaction ?? defaultCompaction(ctx.config.model, ctx.logger)),
  };
}

/**
 * Starts the runner. `stop()` gives active runs `config.runner.shutdownGraceMs` before aborting them.
 * @throws ConfigError when the window of a model the catalogue does not know cannot be discovered (`discoverContextWindows`).
 */
export async function startRunner(given: AppContext, extras: RunnerParts): Promise<StartedRunner> {
  // Before anything starts: a model whose window no server gives stops the start with nothing to undo.
  const ctx = { ...given, config: await discoverContextWindows(given.config, { logger: given.logger }) };
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  const protocolOpts = {
    client: ctx.redis,
    prefix,
    leaseMs: config.runs.leaseMs,
    retention: retentionOptions(config.retention),
    pluginKeys: extras.pluginKeys ?? [],
  };
  const runs = new Runs(protocolOpts);
  const state = new ConversationState(protocolOpts);
  const queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-runner-queue' });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName, bullPrefix: bullPrefixFor(prefix), logger });
  const subscriber = ctx.connectRedis({ connectionName: 'steerbot-control' }) as Redis;
  const control = new ControlListener(subscriber, prefix, logger);
  await control.start();
  const owner = workerIdentity();
  const { plugin } = extras;
  const channels = extras.channels ?? [];
  const { executor, features } = await executorFor(ctx, extras, { runs, state, control, queue, owner });
  const workerConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-runner-worker' });
  const worker = new RunWorker({
    executor,
    connection: workerConn,
    queueName: config.runs.queueName,
    bullPrefix: bullPrefixFor(prefix),
    leaseMs: config.runs.leaseMs,
    concurrency: config.runner.concurrency,
    logger,
    ...(extras.lockDurationMs !== undefined && { lockDurationMs: extras.lockDurationMs }),
    ...(extras.stalledIntervalMs !== undefined && { stalledIntervalMs: extras.stalledIntervalMs }),
  });
  logger.info({ owner, plugin: plugin.manifest.name, concurrency: config.runner.concurrency, features: features.map((f) => f.name) }, 'runner started');
  let closed: Promise<{ abortedInFlight: number }> | undefined;
  const close = (graceMs = config.runner.shutdownGraceMs) =>
    (closed ??= (async () => {
      const report = await worker.close(graceMs);
      logger.info(report, 'runner stopped');
      // After the runs: a feature's services (schedules) serve them to their end.
      for (const f of features) await f.close?.().catch((err: unknown) => logger.warn({ err, feature: f.name }, 'feature close failed'));
      await control.close();
      await queue.close();
      await Promise.all(channels.map((c) => c.stop().catch(() => undefined)));
      await plugin.close?.().catch((err: unknown) => logger.warn({ err }, 'runner plugin close failed'));
      workerConn.disconnect();
      queueConn.disconnect();
      return report;
    })());
  return { executor, worker, owner, close, stop: async () => void (await close()) };
}

/** What the runner made before its executor: the protocol, the control listener, the queue and its own id. */
interface ExecutorParts {
  runs: Runs;
  state: ConversationState;
  control: ControlListener;
  queue: RunQueue;
  owner: string;
}

/** The run executor, with the runner features made from the kit of the runner's services. */
async function executorFor(ctx: AppContext, extras: RunnerParts, p: ExecutorParts): Promise<{ executor: RunExecutor; features: RunnerFeature[] }> {
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  const channels = runChannels(extras.channels, extras.resolveOutbound);
  const identities = new IdentityStore({ redis: ctx.redis, prefix });
  const kit: RunnerFeatureKit = {
    config,
    logger,
    redis: ctx.redis,
    prefix,
    identities,
    channels,
    now: extras.now ?? Date.now,
    ingest: { dispatch: dispatchFromConfig(config, ctx.redis, extras.plugin.manifest.capabilities.steering, extras.pluginKeys ?? []), queue: p.queue, logger },
    connectRedis: ctx.connectRedis,
    workerTimings: {
      ...(extras.lockDurationMs !== undefined && { lockDurationMs: extras.lockDurationMs }),
      ...(extras.stalledIntervalMs !== undefined && { stalledIntervalMs: extras.stalledIntervalMs }),
    },
  };
  const features = await Promise.all(extras.features.map((make) => make(kit)));
  const executor = new RunExecutor({
    client: ctx.redis,
    prefix,
    runs: p.runs,
    state: p.state,
    plugin: extras.plugin,
    control: p.control,
    enqueue: (c, r) => p.queue.enqueue(c, r),
    channels,
    identities,
    logger: logger.child({ part: 'runner' }),
    settings: runSettings(ctx, extras, p.owner),
    features,
  });
  return { executor, features };
}

/** The run settings of `config`, every default resolved. */
function runSettings(ctx: AppContext, extras: RunnerParts, owner: string): RunSettings {
  const { config } = ctx;
  return {
    owner,
    leaseMs: config.runs.leaseMs,
    heartbeatMs: config.runs.heartbeatMs,
    model: config.model,
    steeringMode: extras.plugin.manifest.steeringMode ?? DEFAULTS.agent.steeringMode,
    historyTailEntries: config.compaction.tailEntries,
    failureMessage: DEFAULT_FAILURE_MESSAGE,
    followUpsOnFailure: config.runs.followUpsOnFailure,
    compaction: compactionSettings(ctx, extras),
    outboxTtlSeconds: config.runner.outboxTtlSeconds,
    outboxMaxEntries: config.retention.indexMaxEntries,
  };
}

/** The summarizer is the configured model; without a usable one, summaries are the deterministic fallback. */
function defaultCompaction(settings: ModelSettings, logger: Logger): CompactionSettings {
  try {
    return { model: createModel(settings) };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    logger.warn({ err }, 'no usable model (see the model settings): compaction writes deterministic summaries');
    return {};
  }
}
