/** The Dispatch of a configuration: what hosts ingest with, and runners ingest schedule fires with. */
import type { CoreConfig } from '../config/load.js';
import type { RedisClient } from '../scripts/index.js';
import { Dispatch } from './dispatch.js';
import { retentionOptions } from './retention.js';

/** The host's Dispatch (ingest and commands) for a configuration. */
export function dispatchFromConfig(config: CoreConfig, client: RedisClient, steeringCapable: boolean, pluginKeys: readonly string[] = []): Dispatch {
  return new Dispatch({
    client,
    prefix: config.redis.prefix,
    dedupeTtlSeconds: config.dispatch.dedupeTtlSeconds,
    steeringCap: config.dispatch.steeringCap,
    defaultPolicy: config.dispatch.defaultPolicy,
    steeringCapable,
    maxMessageChars: config.dispatch.maxMessageChars,
    leaseMs: config.runs.leaseMs,
    rateLimit: config.dispatch.rateLimit,
    afterPurge: config.dispatch.afterPurge,
    retention: retentionOptions(config.retention),
    pluginKeys,
  });
}
