/** The schedules service and heartbeats of a configuration (hosts and runners build theirs alike). */
import type { AppContext } from '../app-context.js';
import { DEFAULTS } from '../config/defaults.js';
import type { IdentityStore } from '../people/identity.js';
import { bullPrefixFor } from '../protocol/run-queue.js';
import type { RedisClient } from '../redis/connection.js';
import { HeartbeatKeeper } from './heartbeats.js';
import { Schedules } from './schedules.js';

/** A started schedules service, with the BullMQ connection it owns. */
export interface ConfiguredSchedules {
  schedules: Schedules;
  heartbeats: HeartbeatKeeper;
  /** Closes the queue and its connection. */
  close(): Promise<void>;
}

/**
 * The configuration's schedules service (limits from `schedules.*`) on a
 * connection of its own, and its heartbeats; undefined when `schedules.enabled` is false.
 * With `identities` (the host's), purging a person cancels the schedules they
 * own, and a link hands them to the identity they joined.
 */
export function schedulesFromConfig(
  ctx: Pick<AppContext, 'config' | 'logger' | 'redis' | 'connectRedis'>,
  channelIds: Iterable<string>,
  connectionName: string,
  identities?: IdentityStore,
): ConfiguredSchedules | undefined {
  const { config, logger } = ctx;
  if (!config.schedules.enabled) return undefined;
  const connection: RedisClient = ctx.connectRedis({ forBullmq: true, connectionName });
  const schedules = new Schedules({
    client: ctx.redis,
    prefix: config.redis.prefix,
    connection,
    bullPrefix: bullPrefixFor(config.redis.prefix),
    queueName: DEFAULTS.schedules.queueName,
    limits: { maxPerConversation: config.schedules.maxPerConversation, minIntervalSeconds: config.schedules.minIntervalSeconds },
    logger,
  });
  const heartbeats = new HeartbeatKeeper(schedules, config.schedules.heartbeats, channelIds, logger);
  const unhook = identities?.onChange({
    purged: async (identity) => {
      const cancelled = await schedules.cancelOwnedBy(identity);
      if (cancelled > 0) logger.info({ cancelled }, "purge: the person's schedules were cancelled");
    },
    linked: ({ from, into }) => schedules.mergeOwner(from, into),
  });
  return {
    schedules,
    heartbeats,
    close: async () => {
      unhook?.();
      await schedules.close();
      connection.disconnect();
    },
  };
}
