/**
 * The real channel host (`createChannelHost`: access policy, commands, input policy)
 * over a real `Dispatch` on Redis, for channel tests without a runner: new
 * runs are recorded in `enqueued`, not queued.
 */
import type { ChannelHost, ChannelOutbound, ChannelSettings } from 'steerbot/channel';
import type { RedisClient } from 'steerbot/plugin';
import { AccessGate } from '../host/access/gate.js';
import { accessAdmission } from '../host/access/step.js';
import { AccessStore } from '../host/access/store.js';
import { type HttpServer, routeRegistry } from '../host/http.js';
import { createChannelHost } from '../host/receive.js';
import { accessSchema } from '../src/config/schema.js';
import type { Logger } from '../src/logger.js';
import { IdentityStore } from '../src/people/identity.js';
import { Dispatch } from '../src/protocol/dispatch.js';

/** Options of `ingestOnlyHost`. */
export interface IngestOnlyHostOptions {
  /** The Redis the host dispatches on. */
  redis: RedisClient;
  /** Key prefix of the test. */
  prefix: string;
  /** The host's logger. */
  logger: Logger;
  /**
   * Where channels register routes (the process's HTTP server, built with the repository's `createHttpServer`).
   * Default: none (gateway and polling channels need none).
   * @internal
   */
  http?: HttpServer;
  /** A channel's settings by channel id. Default: none. */
  settings?: (channelId: string) => ChannelSettings | undefined;
  /** A channel's outbound side by channel id, for command replies. Default: none. */
  outbound?: (channelId: string) => ChannelOutbound | undefined;
  /**
   * Who may talk: the `access` config section as written (`{ channels: { <id>: { policy, users, … } } }`),
   * read on every message so a test can change it. Default: every channel open.
   */
  access?: () => unknown;
}

/** Where routes go without an HTTP server: a channel that registers one is misconfigured for this host. */
const noRoutes = {
  add(): never {
    throw new Error('ingestOnlyHost: a channel registered an HTTP route, but no `http` server was given');
  },
};

/** What `ingestOnlyHost` returns. */
export interface IngestOnlyHost {
  /** The host to start channels with. */
  host: ChannelHost;
  /**
   * The dispatch under the host (tests read conversation status through it).
   * @internal
   */
  dispatch: Dispatch;
  /** New runs, `[conversationId, runId]`, in the order they would have been queued. */
  enqueued: Array<[string, string]>;
}

/**
 * The channel host over a real `Dispatch` on `o.redis` under `o.prefix`; new runs are recorded in `enqueued`, never run.
 * Its commands are the conversation's and approvals' (`/stop`, `/status`, `/approve`, …) and, with `access`, `/pair` and
 * `/link`; no feature is registered, so `/memory` or `/schedules` is an ordinary message here.
 */
export function ingestOnlyHost(o: IngestOnlyHostOptions): IngestOnlyHost {
  const dispatch = new Dispatch({ client: o.redis, prefix: o.prefix });
  const enqueued: Array<[string, string]> = [];
  const host = createChannelHost({
    routes: o.http ? routeRegistry(o.http) : noRoutes,
    redis: o.redis,
    prefix: o.prefix,
    logger: o.logger,
    dispatch,
    ingest: dispatch,
    enqueue: async (conversationId, runId) => void enqueued.push([conversationId, runId]),
    settings: (id) => o.settings?.(id),
    outbound: (id) => o.outbound?.(id),
    features: o.access ? [accessAdmission(accessGateOf(o, o.access))] : [],
  });
  return { host, dispatch, enqueued };
}

/** An access gate that parses `access()` on every check (the section as a test last set it). */
function accessGateOf(o: IngestOnlyHostOptions, access: () => unknown): AccessGate {
  const parsed = () => accessSchema.parse(access() ?? {});
  const store = new AccessStore(o.redis, o.prefix, parsed(), new IdentityStore({ redis: o.redis, prefix: o.prefix }));
  const gate = new AccessGate(parsed(), store, o.logger);
  // The gate reads `config.channels` per message: keep it current.
  Object.defineProperty(gate, 'config', { get: parsed });
  return gate;
}
