/**
 * Starts the host's parts other than the HTTP server itself: dispatch
 * (ingest), the run queue, the reconciler and the configured channels,
 * which register their routes on `ctx.http` before it listens.
 */
import type { AppContext, Stoppable } from '../src/app-context.js';
import type { SteerbotConfig } from '../src/config.js';
import type { RedisClient } from '../src/scripts/index.js';
import type { ChannelHost, ChannelPlugin } from '../src/channel.js';
import { Dispatch } from '../src/protocol/dispatch.js';
import { RunQueue } from '../src/run-queue.js';
import { channelSettings, createChannels } from './channels.js';
import type { HttpServer } from './http.js';
import { IngestService } from './ingest.js';
import { createChannelHost } from './receive.js';
import { startReconciler } from './reconciler.js';

/** The host's context: the app's, plus the HTTP server (not yet listening) to register webhook routes on. */
export interface HostContext extends AppContext {
  /** Register routes here; the entry starts listening after `startHost` resolves. */
  http: HttpServer;
}

/** Extra options of `startHost` (tests and embedding). */
export interface HostExtras {
  /** The channel plugins. Default: created from `config.channels`. */
  channels?: ChannelPlugin[];
  /** `fetch` given to the channels created from config (platform API calls). Default: the global `fetch`. */
  fetch?: typeof fetch;
}

/** A started host, with its services exposed for channel plugins and tests. */
export interface StartedHost extends Stoppable {
  dispatch: Dispatch;
  ingest: IngestService;
  queue: RunQueue;
  /** What the channels were started with. */
  channelHost: ChannelHost;
  /** The started channel plugins. */
  channels: ChannelPlugin[];
}

/** The host's Dispatch (ingest and commands) for a configuration. */
export function dispatchFromConfig(config: SteerbotConfig, client: RedisClient): Dispatch {
  return new Dispatch({
    client,
    prefix: config.redis.prefix,
    dedupeTtlSeconds: config.dispatch.dedupeTtlSeconds,
    steeringCap: config.dispatch.steeringCap,
    defaultPolicy: config.dispatch.defaultPolicy,
    steeringCapable: config.runner.capabilities.steering,
    maxMessageChars: config.dispatch.maxMessageChars,
    leaseMs: config.runs.leaseMs,
  });
}

/** Starts the host. On a failure part-way, stops what already started and rethrows. */
export async function startHost(ctx: HostContext, extras: HostExtras = {}): Promise<StartedHost> {
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  const dispatch = dispatchFromConfig(config, ctx.redis);
  const channels =
    extras.channels ?? createChannels(config, { logger, redis: ctx.redis, prefix, ...(extras.fetch && { fetch: extras.fetch }) });
  const queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-host-queue' });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName });
  const ingest = new IngestService(dispatch, queue, logger.child({ part: 'ingest' }));
  const settings = channelSettings(config);
  const outbounds = new Map(channels.map((p) => [p.id, p.outbound]));
  const channelHost = createChannelHost({
    http: ctx.http,
    redis: ctx.redis,
    prefix,
    logger,
    dispatch,
    ingest,
    enqueue: (conversationId, runId) => queue.enqueue(conversationId, runId),
    settings: (id) => settings.get(id),
    outbound: (id) => outbounds.get(id),
  });
  const reconciler = startReconciler({
    client: ctx.redis,
    prefix,
    queue,
    logger: logger.child({ part: 'reconciler' }),
    intervalMs: config.runs.reconcileIntervalMs,
  });

  const started: ChannelPlugin[] = [];
  const stop = async () => {
    // Channels first: no new input while the rest shuts down.
    await Promise.all(started.map((p) => p.stop().catch((err: unknown) => logger.error({ err, channel: p.id }, 'channel stop failed'))));
    await reconciler.stop();
    await queue.close();
    queueConn.disconnect();
  };
  try {
    for (const plugin of channels) {
      await plugin.start(channelHost);
      started.push(plugin);
      logger.info({ channel: plugin.id }, 'channel started');
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { dispatch, ingest, queue, channelHost, channels, stop };
}
