/**
 * What the host and the runner get when they start: configuration, logger
 * and Redis, all owned by the process entry (they must not close them).
 */
import type { CoreConfig } from './config/load.js';
import type { Logger } from './logger.js';
import type { RedisClient, RedisCommonOptions, RedisConnectionOptions } from './redis/connection.js';

/** Shared services of one steerbot process. */
export interface AppContext {
  /** The validated configuration. */
  config: CoreConfig;
  /** The process logger; derive children with `conversationLogger` / `runLogger`. */
  logger: Logger;
  /** URL of the Redis in `single` mode (possibly a private server the CLI started); undefined in `sentinel` / `cluster` mode. */
  redisUrl: string | undefined;
  /** How to reach Redis, for code that needs its own connections. */
  redisConnection: RedisConnectionOptions;
  /** The shared command connection (not for blocking commands or subscriptions). Closed by the entry on shutdown. */
  redis: RedisClient;
  /**
   * Opens a new connection of the same Redis (BullMQ workers, pub/sub subscribers).
   * The caller owns it and must close it in its `stop()`.
   */
  connectRedis(opts?: Omit<RedisCommonOptions, 'password'>): RedisClient;
}

/** What a started part of the process (host, runner) returns. */
export interface Stoppable {
  /** Stops the part; resolves when it no longer uses Redis. Must not throw. */
  stop(): Promise<void>;
}
