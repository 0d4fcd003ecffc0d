/** The schedules service and heartbeats of a configuration (hosts and runners build theirs alike). */
import type { AppContext } from '../app-context.js';
import { DEFAULTS } from '../defaults.js';
import type { RedisClient } from '../redis.js';
import { bullPrefixFor } from '../run-queue.js';
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
 */
export function schedulesFromConfig(ctx: AppContext, channelIds: Iterable<string>, connectionName: string): ConfiguredSchedules | undefined {
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
  return {
    schedules,
    heartbeats,
    close: async () => {
      await schedules.close();
      connection.disconnect();
    },
  };
}
