/**
 * Redis connections (ioredis 6): one factory for single node, Sentinel and
 * Cluster, plus a socket-safe PING probe and a log-safe summary.
 *
 * ioredis 6 speaks RESP3 by default; we keep its default `replyMapping:
 * 'legacy'`, so map replies arrive as flat arrays and doubles as strings,
 * exactly as with RESP2. Code and Lua wrappers may rely on that.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { ConfigError, redactSecrets, RedisUnavailableError, SteerbotError } from './errors.js';
import type { HostPort, RedisConfig } from './config-schema.js';

/** A Redis client of any topology. Both expose the same command API. */
export type RedisClient = Redis | Cluster;

/** Options every connection form shares. */
export interface RedisCommonOptions {
  /**
   * The connection will carry BullMQ (queues, workers): sets
   * `maxRetriesPerRequest: null` so commands wait for a reconnect instead of
   * failing, as BullMQ requires. Default false (commands fail after 20 retries).
   */
  forBullmq?: boolean;
  /** `CLIENT SETNAME` for `CLIENT LIST`. Default `steerbot`. */
  connectionName?: string;
  /** Password; overrides one in a URL. Default: none. */
  password?: string;
}

/** How to get a Redis client. */
export type RedisConnectionOptions =
  /** An existing client; the caller keeps ownership (we never close it). */
  | { client: RedisClient }
  /** A single node by URL (`redis://` / `rediss://`). */
  | ({ url: string } & RedisCommonOptions)
  /** A master found through Sentinels. */
  | ({ mode: 'sentinel'; sentinels: HostPort[]; name: string } & RedisCommonOptions)
  /** A Redis Cluster from seed nodes. */
  | ({ mode: 'cluster'; nodes: HostPort[] } & RedisCommonOptions);

function baseOptions(opts: RedisCommonOptions): RedisOptions {
  return {
    connectionName: opts.connectionName ?? 'steerbot',
    ...(opts.forBullmq ? { maxRetriesPerRequest: null } : {}),
    ...(opts.password !== undefined ? { password: opts.password } : {}),
  };
}

/** Creates a client (connecting in the background), or returns the given one. */
export function createRedis(opts: RedisConnectionOptions): RedisClient {
  if ('client' in opts) return opts.client;
  if ('url' in opts) return new Redis(opts.url, baseOptions(opts));
  if (opts.mode === 'sentinel') {
    return new Redis({ ...baseOptions(opts), sentinels: opts.sentinels, name: opts.name });
  }
  const clusterOptions: ClusterOptions = { redisOptions: baseOptions(opts) };
  return new Cluster(opts.nodes, clusterOptions);
}

/**
 * Connection options from the `redis` config section. `url` (e.g. from
 * `ensureRedis`) fills in a single-mode config that has none.
 * @throws ConfigError when single mode has no URL at all.
 */
export function redisOptionsFromConfig(
  cfg: RedisConfig,
  extra: { url?: string } & Omit<RedisCommonOptions, 'password'> = {},
): RedisConnectionOptions {
  const common: RedisCommonOptions = {
    ...(extra.forBullmq !== undefined ? { forBullmq: extra.forBullmq } : {}),
    ...(extra.connectionName !== undefined ? { connectionName: extra.connectionName } : {}),
    ...(cfg.password !== undefined ? { password: cfg.password } : {}),
  };
  switch (cfg.mode) {
    case 'sentinel':
      return { mode: 'sentinel', sentinels: cfg.sentinels, name: cfg.sentinelName ?? '', ...common };
    case 'cluster':
      return { mode: 'cluster', nodes: cfg.clusterNodes, ...common };
    case 'single': {
      const url = cfg.url ?? extra.url;
      if (url === undefined) throw new ConfigError([{ path: 'redis.url', message: 'no Redis URL (set REDIS_URL)' }]);
      return { url, ...common };
    }
  }
}

/** `createRedis(redisOptionsFromConfig(cfg, extra))`. */
export function redisFromConfig(cfg: RedisConfig, extra: { url?: string } & Omit<RedisCommonOptions, 'password'> = {}): RedisClient {
  return createRedis(redisOptionsFromConfig(cfg, extra));
}

/** A one-line, log-safe description of a connection: no password. */
export function redisSummary(opts: RedisConnectionOptions): string {
  const list = (nodes: HostPort[]) => nodes.map((n) => `${n.host}:${n.port}`).join(',');
  if ('client' in opts) return opts.client instanceof Cluster ? 'cluster (given client)' : 'redis (given client)';
  if ('url' in opts) return `single ${safeUrl(opts.url)}`;
  if (opts.mode === 'sentinel') return `sentinel ${opts.name} via ${list(opts.sentinels)}`;
  return `cluster via ${list(opts.nodes)}`;
}

function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = 'redacted';
    return u.toString();
  } catch {
    return redactSecrets(url);
  }
}

/**
 * Whether a Redis at `url` answers PING within `timeoutMs`. Never throws, never
 * retries, and closes its socket before resolving.
 */
export async function pingRedis(url: string, timeoutMs = 1000): Promise<boolean> {
  let client: Redis;
  try {
    client = new Redis(url, {
      lazyConnect: true,
      connectTimeout: timeoutMs,
      commandTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      disableClientInfo: true,
      disconnectTimeout: 0, // destroy the socket at once instead of waiting for the peer's FIN
    });
  } catch {
    return false;
  }
  client.on('error', () => {}); // reported through the promise below
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(resolve, timeoutMs, false)));
  try {
    const answered = (async () => {
      await client.connect();
      return (await client.ping()) === 'PONG';
    })().catch(() => false);
    return await Promise.race([answered, timeout]);
  } finally {
    clearTimeout(timer);
    if (client.status !== 'end') {
      const ended = new Promise((r) => client.once('end', r));
      client.disconnect();
      await ended;
    }
  }
}

/** Closes a client we own and resolves once its socket is closed: QUIT when connected (pending replies arrive first), else drop it. */
export async function closeRedis(client: RedisClient): Promise<void> {
  if (client.status === 'end') return;
  const ended = new Promise((r) => client.once('end', r));
  if (client.status === 'ready') {
    await client.quit().catch(() => client.disconnect());
    await ended;
    return;
  }
  // Between reconnect attempts there is no socket, and no 'end' event comes after disconnect().
  const socketOpen = client.status === 'connecting' || client.status === 'connect';
  client.disconnect();
  if (socketOpen) await ended;
}

// ioredis reports a lost connection by these error names and socket codes, and by
// messages only (no code) for a closed or unwritable stream.
const REDIS_DOWN_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);
const REDIS_DOWN_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
const REDIS_DOWN_MESSAGES = /Connection is closed|Stream isn't writeable|Command timed out|^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY)\b/;

/** True when `err` says Redis cannot be reached (as opposed to a refused command). */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error) || err instanceof SteerbotError) return err instanceof RedisUnavailableError;
  const code = (err as NodeJS.ErrnoException).code;
  return REDIS_DOWN_NAMES.has(err.name) || (code !== undefined && REDIS_DOWN_CODES.has(code)) || REDIS_DOWN_MESSAGES.test(err.message);
}

/** Rethrows a Redis connection failure as RedisUnavailableError; other errors unchanged. */
export function asRedisUnavailable(err: unknown): unknown {
  if (err instanceof RedisUnavailableError || !isRedisUnavailable(err)) return err;
  return new RedisUnavailableError(`redis unreachable: ${(err as Error).message}`, { cause: err });
}
