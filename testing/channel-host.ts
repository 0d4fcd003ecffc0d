/**
 * The real channel host (`createChannelHost`: allow-lists, commands, policy)
 * over a real `Dispatch` on Redis, for channel tests without a runner: new
 * runs are recorded in `enqueued`, not queued.
 */
import { type HttpServer, routeRegistry } from '../host/http.js';
import { type ChannelSettings, createChannelHost } from '../host/receive.js';
import type { ChannelHost, ChannelOutbound } from '../src/channel.js';
import type { Logger } from '../src/logger.js';
import { Dispatch } from '../src/protocol/dispatch.js';
import type { RedisClient } from '../src/redis.js';

export interface IngestOnlyHostOptions {
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  /** Where channels register routes. Default: none (gateway and polling channels need none). */
  http?: HttpServer;
  /** A channel's settings by channel id. Default: none. */
  settings?: (channelId: string) => ChannelSettings | undefined;
  /** A channel's outbound side by channel id, for command replies. Default: none. */
  outbound?: (channelId: string) => ChannelOutbound | undefined;
}

/** Where routes go without an HTTP server: a channel that registers one is misconfigured for this host. */
const noRoutes = {
  add(): never {
    throw new Error('ingestOnlyHost: a channel registered an HTTP route, but no `http` server was given');
  },
};

/** The channel host over a real `Dispatch` on `o.redis` under `o.prefix`; new runs are recorded in `enqueued`, never run. */
export function ingestOnlyHost(o: IngestOnlyHostOptions): { host: ChannelHost; dispatch: Dispatch; enqueued: Array<[string, string]> } {
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
  });
  return { host, dispatch, enqueued };
}
