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
import { ConversationIndex } from '../src/people/conversation-index.js';
import { IdentityStore } from '../src/people/identity.js';
import { MemoryStore } from '../src/people/memory.js';
import { loadProfiles } from '../src/people/profiles.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import { dispatchFromConfig } from '../src/protocol/dispatch-config.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import type { SendMessageRequest, SendMessageResult } from '../src/protocol/send.js';
import type { InputPolicy } from '../src/protocol/types.js';
import { INGRESS_COMMAND_TIMEOUT_MS } from '../src/redis/connection.js';
import { schedulesFromConfig } from '../src/schedules/from-config.js';
import type { RedisClient } from '../src/scripts/index.js';
import { AccessGate } from './access/gate.js';
import { AccessStore } from './access/store.js';
import { registerApiRoutes } from './api-routes.js';
import { ApiTokens, apiTokensFromConfig } from './api-tokens.js';
import { ActivityIndex } from './console/activity.js';
import { registerConsole } from './console/routes.js';
import { type HttpServer, routeRegistry } from './http.js';
import { IngestService } from './ingest.js';
import { type ChannelHostDeps, createChannelHost } from './receive.js';
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
  /** Records and delivers a message from outside a run (`MessageSender.send`); the messages API needs it. Default: the API is not served. */
  send?(req: SendMessageRequest, opts: { open: boolean }): Promise<SendMessageResult>;
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
  };
}

/** The access gate of `config.access`, on the ingress connection (refusals fail fast like ingest). */
function accessGate(ctx: HostContext, redis: RedisClient, identities: IdentityStore | undefined): AccessGate {
  const { config } = ctx;
  const prefix = config.redis.prefix;
  const store = new AccessStore(redis, prefix, config.access, identities ?? new IdentityStore({ redis, prefix }));
  return new AccessGate(config.access, store, ctx.logger.child({ part: 'access' }));
}

/** What `peopleParts` gives the host. */
type PeopleParts = Pick<ChannelHostDeps, 'profileOf' | 'memory' | 'noteSender'> & {
  /** The input policy of the profile a conversation's chat or channel binding names (no person: the API, the console). */
  policyOf?(conversationId: string): InputPolicy | undefined;
};

/**
 * What follows a person at the host: their agent profile (input policy,
 * `/status`), memory (`/memory`, `/forget`) and where they wrote (what the
 * export of a person finds); purging them deletes their usage counters,
 * memory and where they wrote, linking merges their memory.
 */
export async function peopleParts(config: CoreConfig, identities: IdentityStore, redis: RedisClient, prefix: string): Promise<PeopleParts> {
  // Memory that was kept while memory was on goes with a purge (or a link) even after it is turned off.
  const memory = new MemoryStore({ redis, prefix, limits: config.memory });
  const budgets = new Budgets({ client: redis, prefix, settings: config.budgets });
  const wrote = new ConversationIndex({ redis, prefix });
  identities.onChange({
    purged: async (identity, accounts) => {
      await Promise.all([budgets.purge(identity), memory.purge(identity), wrote.purge(accounts)]);
    },
    linked: async ({ from, into }) => {
      await memory.merge(from, into);
    },
  });
  const noteSender = (channelId: string, senderId: string, conversationId: string) => wrote.note(channelId, senderId, conversationId);
  const parts: Pick<ChannelHostDeps, 'profileOf' | 'memory' | 'noteSender'> = config.memory.enabled
    ? { noteSender, memory: { store: memory, identityOf: (channelId, senderId) => identities.tryResolve(channelId, senderId) } }
    : { noteSender };
  if (Object.keys(config.profiles).length === 0) return parts;
  const profiles = await loadProfiles(config.model, config.profiles, config.bindings);
  return {
    ...parts,
    policyOf: (conversationId) => profiles.resolve(conversationId).inputPolicy,
    profileOf: async (channelId, conversationId, senderId) =>
      profiles.resolve(conversationId, profiles.bindsIdentities ? await identities.tryResolve(channelId, senderId) : undefined),
  };
}

type Scheduling = ReturnType<typeof schedulesFromConfig>;

/** What a channel message notes besides ingest: the console's activity index, and a channel-wide heartbeat's start. */
function activityHook(activity: ActivityIndex | undefined, scheduling: Scheduling, heartbeatConfig: object): ((conversationId: string) => void) | undefined {
  const heartbeats = scheduling && Object.keys(heartbeatConfig).length > 0 ? scheduling.heartbeats : undefined;
  if (!activity && !heartbeats) return undefined;
  return (conversationId) => {
    activity?.note(conversationId);
    // A channel-wide heartbeat starts with a conversation's first message this host sees.
    if (heartbeats) void heartbeats.ensure(conversationId);
  };
}

/** What the console and the send/events API are served with. */
interface OperatorRouteDeps {
  routes: ReturnType<typeof routeRegistry>;
  dispatch: Dispatch;
  queue: RunQueue;
  ingressConn: RedisClient;
  channelPolicy: (conversationId: string) => InputPolicy | undefined;
  scheduling: Scheduling;
  access: AccessGate;
  /** People's memory; undefined when memory is off. */
  memory: MemoryStore | undefined;
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
      ...(d.scheduling && { schedules: d.scheduling.schedules }),
      access: d.access.store,
      memory: d.memory,
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
  const { settings, outbounds, problems } = channelMaps(channels, config.access);
  const channelOf = channelResolver(settings.keys());
  const routes = routeRegistry(ctx.http);
  const identities = parts.identities ?? new IdentityStore({ redis: ingressConn, prefix });
  const access = accessGate(ctx, ingressConn, identities);
  // The recent-activity index is the console's only: without the console nothing reads it, so nothing writes it.
  const activity = config.host.console.enabled ? new ActivityIndex(ctx.redis, prefix, logger) : undefined;
  const scheduling = schedulesFromConfig(ctx, settings.keys(), 'steerbot-host-schedules', identities);
  const onActivity = activityHook(activity, scheduling, config.schedules.heartbeats);
  const { policyOf, ...people } = await peopleParts(config, identities, ingressConn, prefix);
  // A conversation's input policy outside a message (events API, console): its chat's or channel's profile.
  const channelPolicy = (conversationId: string) => policyOf?.(conversationId) ?? settings.get(channelOf(conversationId) ?? '')?.policy;
  const channelHost = createChannelHost({
    ...people,
    routes,
    ...(onActivity && { onActivity }),
    ...(scheduling && { schedules: scheduling.schedules }),
    redis: ctx.redis,
    prefix,
    logger,
    dispatch,
    ingest,
    enqueue: (conversationId, runId) => queue.enqueue(conversationId, runId),
    settings: (id) => settings.get(id),
    outbound: (id) => outbounds.get(id),
    channelProblems: (id) => problems.get(id),
    access,
  });
  registerOperatorRoutes(ctx, parts, { routes, dispatch, queue, ingressConn, channelPolicy, scheduling, access, memory: people.memory?.store });
  const reconcilerLogger = logger.child({ part: 'reconciler' });
  const reconciler = startReconciler({ client: ctx.redis, prefix, queue, logger: reconcilerLogger, intervalMs: config.runs.reconcileIntervalMs });

  const started: ChannelPlugin[] = [];
  const stop = async () => {
    // Channels first: no new input while the rest shuts down.
    await Promise.all(started.map((p) => p.stop().catch((err: unknown) => logger.error({ err, channel: p.id }, 'channel stop failed'))));
    await reconciler.stop();
    await activity?.flush();
    await scheduling?.close();
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
  return { dispatch, ingest, queue, channelHost, channels, access, stop };
}
