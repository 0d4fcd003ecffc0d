/**
 * Redis connections (ioredis 6): one factory for single node, Sentinel and
 * Cluster, plus a socket-safe PING probe and a log-safe summary.
 *
 * ioredis 6 speaks RESP3 by default; we keep its default `replyMapping:
 * 'legacy'`, so map replies arrive as flat arrays and doubles as strings,
 * exactly as with RESP2. Code and Lua wrappers may rely on that.
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { HostPort, RedisConfig } from '../config/schema.js';
import { ConfigError, RedisUnavailableError, redactSecrets, SteerbotError } from '../errors.js';
import type { Logger } from '../logger.js';

/** A Redis client of any topology. Both expose the same command API. */
export type RedisClient = Redis | Cluster;

/**
 * Command timeout of the ingress connections (`failFastMs`), in ms: a webhook
 * answers 503 within about this long when Redis hangs, at once when it is down.
 */
export const INGRESS_COMMAND_TIMEOUT_MS = 1000;

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
  /**
   * Fail fast, for request paths (webhook ingress) that must answer 503 rather
   * than wait for Redis: no offline queue (a command while disconnected fails
   * at once), no retry of a command cut off by a disconnect, and every command
   * times out after this many ms. Not with `forBullmq` workers (blocking
   * commands). Default: unset (commands wait for a reconnect).
   */
  failFastMs?: number;
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

/** Connection options that keep ioredis's default `replyMapping: 'legacy'` (see the header). */
type LegacyRedisOptions = RedisOptions & { replyMapping?: 'legacy' };

function baseOptions(opts: RedisCommonOptions): LegacyRedisOptions {
  return {
    connectionName: opts.connectionName ?? 'steerbot',
    ...(opts.forBullmq ? { maxRetriesPerRequest: null } : {}),
    ...(opts.failFastMs !== undefined ? { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: opts.failFastMs } : {}),
    ...(opts.password !== undefined ? { password: opts.password } : {}),
  };
}

/**
 * Creates a client (connecting in the background), or returns the given one.
 * A created client always has an `error` listener: without one ioredis
 * prints every connection error to stderr, outside the logger and its
 * redaction. Connection state is reported by `watchRedis`.
 */
export function createRedis(opts: RedisConnectionOptions): RedisClient {
  if ('client' in opts) return opts.client;
  let client: RedisClient;
  // ioredis lets the URL's credentials win over `password`; the configured one must (config `redis.password`).
  if ('url' in opts && opts.password !== undefined) {
    const { url, username } = withoutCredentials(opts.url);
    client = new Redis(url, { ...baseOptions(opts), ...(username && { username }) });
  } else if ('url' in opts) client = new Redis(opts.url, baseOptions(opts));
  else if (opts.mode === 'sentinel') client = new Redis({ ...baseOptions(opts), sentinels: opts.sentinels, name: opts.name });
  else {
    const clusterOptions = {
      redisOptions: baseOptions(opts),
      ...(opts.failFastMs !== undefined && { enableOfflineQueue: false }),
    } satisfies ClusterOptions;
    client = new Cluster(opts.nodes, clusterOptions);
  }
  client.on('error', ignoreError);
  return client;
}

function ignoreError(): void {
  // Failures reach callers through their commands; outages through `watchRedis`.
}

/** What `watchRedis` reports through. */
export type RedisWatchLogger = Pick<Logger, 'warn' | 'info'>;

/**
 * Reports a client's connection state changes, once each: a warning when an
 * established connection is lost (not one per reconnect attempt), an info
 * line when it is back. Also makes sure the client has an `error` listener.
 * Returns a function that stops watching.
 */
export function watchRedis(client: RedisClient, logger: RedisWatchLogger, name = 'redis'): () => void {
  let down = false;
  let since = 0;
  const lost = (err?: unknown) => {
    if (down) return;
    down = true;
    since = Date.now();
    logger.warn({ redis: name, ...(err !== undefined && { err }) }, 'redis connection lost; retrying (requests answer 503 meanwhile)');
  };
  const onError = (err: unknown) => lost(err);
  // 'reconnecting' follows an unexpected close only (a graceful server shutdown closes without an error).
  const onClose = () => lost();
  const onReady = () => {
    if (!down) return;
    down = false;
    logger.info({ redis: name, downMs: Date.now() - since }, 'redis connection restored');
  };
  client.on('error', onError);
  client.on('reconnecting', onClose);
  client.on('ready', onReady);
  return () => {
    client.off('error', onError);
    client.off('reconnecting', onClose);
    client.off('ready', onReady);
  };
}

/**
 * Connection options from the `redis` config section. `url` (e.g. from
 * `ensureRedis`) fills in a single-mode config that has none.
 * @throws ConfigError when single mode has no URL at all.
 */
export function redisOptionsFromConfig(cfg: RedisConfig, extra: { url?: string } & Omit<RedisCommonOptions, 'password'> = {}): RedisConnectionOptions {
  const common: RedisCommonOptions = {
    ...(extra.forBullmq !== undefined ? { forBullmq: extra.forBullmq } : {}),
    ...(extra.connectionName !== undefined ? { connectionName: extra.connectionName } : {}),
    ...(extra.failFastMs !== undefined ? { failFastMs: extra.failFastMs } : {}),
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

/** `url` without its credentials, and the user name it named (it picks the ACL user). */
function withoutCredentials(url: string): { url: string; username?: string } {
  try {
    const u = new URL(url);
    if (!u.password && !u.username) return { url };
    const username = decodeURIComponent(u.username);
    u.username = '';
    u.password = '';
    return { url: u.toString(), ...(username && { username }) };
  } catch {
    return { url };
  }
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

/** The oldest Redis steerbot runs on: the ingest script checks and marks an update as seen in one `SET … NX GET` (7.0). */
export const MIN_REDIS_VERSION = '7.0';

/**
 * Refuses a Redis older than {@link MIN_REDIS_VERSION}. Resolves to the server's version when it is new enough,
 * to undefined when `INFO` does not answer within `timeoutMs` or is refused (an outage is `watchRedis`'s to
 * report, not a reason to refuse).
 * @throws ConfigError (at `redis`) naming the version found.
 */
export async function requireRedisVersion(client: RedisClient, timeoutMs = 5000): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, timeoutMs, undefined)));
  const info = await Promise.race([client.info('server').catch(() => undefined), timeout]).finally(() => clearTimeout(timer));
  const version = info === undefined ? undefined : /^redis_version:([\d.]+)/m.exec(info)?.[1];
  if (version === undefined) return undefined;
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const [minMajor = 0, minMinor = 0] = MIN_REDIS_VERSION.split('.').map(Number);
  if (major > minMajor || (major === minMajor && minor >= minMinor)) return version;
  throw new ConfigError([{ path: 'redis', message: `steerbot needs Redis ${MIN_REDIS_VERSION} or newer; the server runs Redis ${version}` }]);
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

/** Awaits a Redis call; a connection failure is thrown as RedisUnavailableError (a 503, so a platform delivers again). */
export async function redisCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw asRedisUnavailable(err);
  }
}
