/**
 * Starts the host's parts other than the HTTP server itself: dispatch
 * (ingest), the run queue, the reconciler and the channels it is given,
 * which register their routes before the server listens.
 */
import { once } from 'node:events';
import type { AppContext, Stoppable } from '../src/app-context.js';
import type { ChannelHost, ChannelPlugin, ChannelSettings } from '../src/channel.js';
import { channelResolver, outboundResolver } from '../src/channel.js';
import type { CoreConfig } from '../src/config/load.js';
import { ConfigError } from '../src/errors.js';
import { generateLoginSecret, operatorAccess, type PageAccess } from '../src/http/access.js';
import { Budgets } from '../src/people/budget.js';
import { IdentityStore } from '../src/people/identity.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import { dispatchFromConfig } from '../src/protocol/dispatch-config.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import type { SendMessageRequest, SendMessageResult } from '../src/protocol/send.js';
import type { InputPolicy } from '../src/protocol/types.js';
import { INGRESS_COMMAND_TIMEOUT_MS } from '../src/redis/connection.js';
import type { RedisClient } from '../src/scripts/index.js';
import { AccessGate } from './access/gate.js';
import { accessAdmission } from './access/step.js';
import { AccessStore } from './access/store.js';
import { registerApiRoutes } from './api-routes.js';
import { ApiTokens, apiTokensFromConfig } from './api-tokens.js';
import { ActivityIndex } from './console/activity.js';
import { registerConsole } from './console/routes.js';
import type { HostFeature, HostFeatureFactory, HostFeatureKit } from './feature.js';
import { type HttpServer, routeRegistry } from './http.js';
import { IngestService } from './ingest.js';
import { hostPurge, type Purge, type PurgeRequest } from './purge.js';
import { createChannelHost } from './receive.js';
import { startReconciler } from './reconciler.js';

/** The host's context: the app's, plus the HTTP server (not yet listening) to register webhook routes on. */
export interface HostContext extends AppContext {
  /** Register routes here; the entry starts listening after `startHost` resolves. */
  http: HttpServer;
  /**
   * The operator's login: the console's secret (and the loopback opt-in), the one the composition printed a
   * login link for and gave the channels. Default: `host.console.token`, else a fresh secret nobody is told
   * (the console then lets nobody in).
   */
  operatorAccess?: PageAccess;
}

/** What the composition gives the host besides the context. */
export interface HostParts {
  /** The channel plugins to start (created, not started). */
  channels: ChannelPlugin[];
  /** The runner plugin pulls steering (its manifest's `steering` capability); without it messages sent during a run are routed with `collect`. */
  steeringCapable: boolean;
  /** Suffixes of the conversation keys plugins declare (`declaredConversationKeys`): `/purge` deletes them. Default: none. */
  pluginKeys?: readonly string[];
  /** Identities (links made by `/link` and the console tell its hooks). Default: a store on the context's Redis. */
  identities?: IdentityStore;
  /** The features' host parts (app/features/), made once the host's services are. */
  features: readonly HostFeatureFactory[];
  /** Records and delivers a message from outside a run (`MessageSender.send`); the messages API needs it. Default: the API is not served. */
  send?(req: SendMessageRequest, opts: { open: boolean; token: string }): Promise<SendMessageResult>;
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
  /** The access policy and its store (pairing codes, approvals, refusals). */
  access: AccessGate;
  /** Purges a conversation the way `/purge` does, with every feature's and channel's purge hooks (host/purge.ts). */
  purge: Purge;
}

export { dispatchFromConfig } from '../src/protocol/dispatch-config.js';

/**
 * The channels' settings, outbound sides and `conversationProblems`, by channel id. A channel's
 * operator-made admins are `access.channels.<id>.admins` (with any a plugin built in code names).
 */
function channelMaps(channels: readonly ChannelPlugin[], access: CoreConfig['access']) {
  const settingsOf = (p: ChannelPlugin): ChannelSettings => {
    const listed = access.channels[p.id];
    // Its senders name themselves: a list would admit whoever claims a listed name.
    if (p.settings?.unverifiedSenders && listed && (listed.users.length > 0 || listed.admins.length > 0)) {
      throw new ConfigError([
        {
          path: `access.channels.${p.id}`,
          message: "this channel's senders choose their own ids (a public chat), so users and admins cannot name them; use policy open or pairing there",
        },
      ]);
    }
    const admins = [...new Set([...(listed?.admins ?? []), ...(p.settings?.admins ?? [])])];
    return { ...p.settings, ...(admins.length > 0 && { admins }) };
  };
  return {
    settings: new Map(channels.map((p) => [p.id, settingsOf(p)])),
    outbounds: new Map(channels.map((p) => [p.id, p.outbound])),
    problems: new Map(channels.flatMap((p) => (p.conversationProblems ? [[p.id, p.conversationProblems.bind(p)] as const] : []))),
    purged: new Map(channels.flatMap((p) => (p.purged ? [[p.id, p.purged.bind(p)] as const] : []))),
  };
}

/** The access gate of `config.access`, on the ingress connection (refusals fail fast like ingest). */
function accessGate(ctx: HostContext, redis: RedisClient, identities: IdentityStore | undefined): AccessGate {
  const { config } = ctx;
  const prefix = config.redis.prefix;
  const store = new AccessStore(redis, prefix, config.access, identities ?? new IdentityStore({ redis, prefix }));
  return new AccessGate(config.access, store, ctx.logger.child({ part: 'access' }));
}

/** Makes the host parts of `factories` from `kit`, in order. */
export async function makeHostFeatures(kit: HostFeatureKit, factories: readonly HostFeatureFactory[]): Promise<HostFeature[]> {
  const features: HostFeature[] = [];
  for (const make of factories) {
    const feature = await make(kit);
    if (features.some((f) => f.name === feature.name)) throw new Error(`two features are named ${feature.name}`);
    features.push(feature);
  }
  return features;
}

/** `/status` lists what a conversation's channel reports wrong in it (`ChannelPlugin.conversationProblems`), by channel id. */
export function channelProblems(problemsOf: (channelId: string) => ((conversationId: string) => Promise<string[]>) | undefined): HostFeature {
  return {
    name: 'channel problems',
    status: async (channelId, conversationId) => ((await problemsOf(channelId)?.(conversationId)) ?? []).map((p) => `Problem: ${p}`),
  };
}

/** A purged conversation's channel deletes what it keeps for it elsewhere (`ChannelPlugin.purged`), on every purge path. */
export function channelPurged(purgedOf: (conversationId: string) => ((conversationId: string) => Promise<void>) | undefined): HostFeature {
  return {
    name: 'channel purge',
    purging: async (conversationId) => {
      const purged = purgedOf(conversationId);
      return async () => void (await purged?.(conversationId));
    },
  };
}

/** What the host's own steps are made from. */
interface BuiltinSteps {
  activity: ActivityIndex | undefined;
  problems: Map<string, (conversationId: string) => Promise<string[]>>;
  purged: Map<string, (conversationId: string) => Promise<void>>;
  channelOf(conversationId: string): string | undefined;
}

/** The host's own steps: the console's recent-activity index, the channels' problems in `/status`, and their purge hooks. */
function builtinFeatures(s: BuiltinSteps): HostFeature[] {
  const noted: HostFeature = {
    name: 'console activity',
    recorded: async (input) => {
      if (input.fresh) s.activity?.note(input.conversationId);
    },
  };
  return [noted, channelProblems((id) => s.problems.get(id)), channelPurged((cid) => s.purged.get(s.channelOf(cid) ?? ''))];
}

/** What the console and the send/events API are served with. */
interface OperatorRouteDeps {
  routes: ReturnType<typeof routeRegistry>;
  dispatch: Dispatch;
  queue: RunQueue;
  ingressConn: RedisClient;
  channelPolicy: (conversationId: string) => InputPolicy | undefined;
  access: AccessGate;
  features: readonly HostFeature[];
  purge: Purge;
}

/** Registers the console (when enabled) and the send/events API (when it has a token). */
function registerOperatorRoutes(ctx: HostContext, parts: HostParts, d: OperatorRouteDeps): void {
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  const enqueue = (conversationId: string, runId: string) => d.queue.enqueue(conversationId, runId);
  if (config.host.console.enabled) {
    const login = ctx.operatorAccess ?? operatorAccess(config.host.console.token ?? generateLoginSecret(), config.host.console.allowLoopback);
    registerConsole({
      routes: d.routes,
      redis: ctx.redis,
      prefix,
      dispatch: d.dispatch,
      queue: d.queue,
      logger,
      token: login.token,
      allowLoopback: login.allowLoopback === true,
      traceUrl: config.host.console.traceUrl,
      channelPolicy: d.channelPolicy,
      channels: parts.channels,
      enqueue,
      access: d.access.store,
      features: d.features,
      purge: d.purge,
      accessChannels: config.access.channels,
      budgets: new Budgets({ client: ctx.redis, prefix, settings: config.budgets }),
    });
  }
  const apiTokens = apiTokensFromConfig(config.host.api);
  if (apiTokens.length > 0 && parts.send) {
    if (config.host.api.token !== undefined) {
      logger.warn('host.api.token is one API token with every scope on every conversation; give each client its own scoped token in host.api.tokens');
    }
    registerApiRoutes({
      routes: d.routes,
      tokens: new ApiTokens(apiTokens, d.ingressConn, prefix),
      redis: d.ingressConn,
      prefix,
      ingest: { dispatch: d.dispatch, queue: d.queue, logger: logger.child({ part: 'api' }) },
      maxMessageChars: config.dispatch.maxMessageChars,
      channelPolicy: d.channelPolicy,
      channelOf: channelResolver(parts.channels.map((c) => c.id)),
      outbound: outboundResolver(parts.channels),
      send: parts.send,
      logger: logger.child({ part: 'api' }),
    });
  }
}

/** Starts the host. On a failure part-way, stops what already started and rethrows. */
export async function startHost(ctx: HostContext, parts: HostParts): Promise<StartedHost> {
  const { config, logger } = ctx;
  const prefix = config.redis.prefix;
  // Ingress fails fast while Redis is down (503, the platform retries) instead of waiting for it.
  const ingressConn = ctx.connectRedis({ failFastMs: INGRESS_COMMAND_TIMEOUT_MS, connectionName: 'steerbot-host-ingress' });
  const dispatch = dispatchFromConfig(config, ingressConn, parts.steeringCapable, parts.pluginKeys);
  const { channels } = parts;
  const queueConn = ctx.connectRedis({ failFastMs: INGRESS_COMMAND_TIMEOUT_MS, connectionName: 'steerbot-host-queue' });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName, bullPrefix: bullPrefixFor(prefix), logger });
  const ingest = new IngestService(dispatch, queue, logger.child({ part: 'ingest' }));
  const { settings, outbounds, problems, purged } = channelMaps(channels, config.access);
  const channelOf = channelResolver(settings.keys());
  const routes = routeRegistry(ctx.http);
  const identities = parts.identities ?? new IdentityStore({ redis: ingressConn, prefix });
  const access = accessGate(ctx, ingressConn, identities);
  // The recent-activity index is the console's only: without the console nothing reads it, so nothing writes it.
  const activity = config.host.console.enabled ? new ActivityIndex(ctx.redis, prefix, logger) : undefined;
  // The features' kit purges through the host's one purge, made once the features it runs the hooks of are.
  let purge: Purge = async () => {
    throw new Error('the host is still starting: nothing can be purged yet');
  };
  const kit = {
    config,
    logger,
    redis: ingressConn,
    prefix,
    identities,
    channelIds: [...settings.keys()],
    connectRedis: ctx.connectRedis,
    purge: (conversationId: string, request?: PurgeRequest) => purge(conversationId, request),
  };
  const made = await makeHostFeatures(kit, parts.features);
  // Access first, always: who may talk is decided before any feature sees the message.
  const features = [accessAdmission(access), ...made, ...builtinFeatures({ activity, problems, purged, channelOf })];
  purge = hostPurge(dispatch.options, features);
  // A conversation's input policy outside a message (events API, console): its chat's or channel's profile.
  const channelPolicy = (conversationId: string) =>
    features.reduce<InputPolicy | undefined>((found, f) => found ?? f.inputPolicy?.(conversationId), undefined) ??
    settings.get(channelOf(conversationId) ?? '')?.policy;
  const channelHost = createChannelHost({
    routes,
    redis: ctx.redis,
    prefix,
    logger,
    dispatch,
    ingest,
    enqueue: (conversationId, runId) => queue.enqueue(conversationId, runId),
    settings: (id) => settings.get(id),
    outbound: (id) => outbounds.get(id),
    features,
    purge,
  });
  registerOperatorRoutes(ctx, parts, { routes, dispatch, queue, ingressConn, channelPolicy, access, features, purge });
  const reconcilerLogger = logger.child({ part: 'reconciler' });
  const reconciler = startReconciler({ client: ctx.redis, prefix, queue, logger: reconcilerLogger, intervalMs: config.runs.reconcileIntervalMs });

  const started: ChannelPlugin[] = [];
  const stop = async () => {
    // Channels first: no new input while the rest shuts down.
    await Promise.all(started.map((p) => p.stop().catch((err: unknown) => logger.error({ err, channel: p.id }, 'channel stop failed'))));
    await reconciler.stop();
    await activity?.flush();
    for (const f of made) await f.close?.().catch((err: unknown) => logger.error({ err, feature: f.name }, 'feature close failed'));
    await queue.close();
    queueConn.disconnect();
    ingressConn.disconnect();
  };
  try {
    // Without an offline queue, a command sent before the connection is ready fails: wait for it once.
    if (ingressConn.status !== 'ready') await once(ingressConn, 'ready');
    for (const plugin of channels) {
      await plugin.start(channelHost);
      started.push(plugin);
      logger.info({ channel: plugin.id }, 'channel started');
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { dispatch, ingest, queue, channelHost, channels, access, purge, stop };
}
