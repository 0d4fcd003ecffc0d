/**
 * Finds a Redis for local runs and tests: a given URL, else one already on
 * 127.0.0.1:6379, else a private `redis-server` on a free port.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ConfigError } from '../errors.js';
import { pingRedis } from './connection.js';

/** Where Redis usually answers on a developer machine. */
export const DEFAULT_PROBE_URL = 'redis://127.0.0.1:6379';

/** What to tell someone who has no Redis. */
export const NO_REDIS_HELP =
  'no Redis found: nothing answers on 127.0.0.1:6379 and redis-server is not installed. ' +
  'Install it (`apt-get install redis-server`, `brew install redis`), or run `docker compose up redis`, ' +
  'or set REDIS_URL to a Redis you have.';

/** Options of `ensureRedis`. */
export interface EnsureRedisOptions {
  /** A Redis the caller already has; returned as is. Default: none. */
  url?: string;
  /** Data directory of a private server (created if missing). */
  dataDir: string;
  /** Private server keeps data across restarts (AOF) when true; in memory only when false. */
  persistent: boolean;
  /** Receives one line about which Redis is used. Default: silent. */
  logger?: Pick<Logger, 'info' | 'warn'>;
  /** Address probed before starting a private server. Default `redis://127.0.0.1:6379`. */
  probeUrl?: string;
  /** The `redis-server` executable: a name looked up on PATH, or a path. Default `redis-server`. */
  redisServerBin?: string;
  /** How long a private server gets to answer PING, in ms. Default 10 000. */
  startTimeoutMs?: number;
  /** When set and no `url` is given, throw this message instead of probing for or starting a Redis. Default: unset. */
  refuseToStart?: string;
}

/** The Redis to use. */
export interface EnsuredRedis {
  /** Its URL. */
  url: string;
  /** Stops the private server and waits for it to exit; a no-op when none was started. */
  stop: () => Promise<void>;
  /** Whether a private server was started. */
  started: boolean;
}

/**
 * Returns a usable Redis URL, starting a private `redis-server` if needed.
 * @throws Error with installation help when there is no Redis and no `redis-server`.
 */
export async function ensureRedis(opts: EnsureRedisOptions): Promise<EnsuredRedis> {
  const noop = async () => {};
  if (opts.url) return { url: opts.url, stop: noop, started: false };
  if (opts.refuseToStart !== undefined) throw new ConfigError([{ path: 'redis.url', message: opts.refuseToStart }]);
  const probeUrl = opts.probeUrl ?? DEFAULT_PROBE_URL;
  if (await pingRedis(probeUrl, 500)) {
    opts.logger?.info({ redis: probeUrl }, 'using the Redis that answers on the default address');
    return { url: probeUrl, stop: noop, started: false };
  }
  if (opts.persistent) {
    const orphan = await adoptOrphan(resolve(opts.dataDir));
    if (orphan) {
      opts.logger?.warn({ redis: orphan.url, dataDir: resolve(opts.dataDir) }, 'reusing the private redis-server a previous run left behind');
      return orphan;
    }
  }
  const server = await startPrivateRedis(opts);
  opts.logger?.info({ redis: server.url, dataDir: resolve(opts.dataDir), persistent: opts.persistent }, 'started a private redis-server');
  return server;
}

/**
 * Starts a private `redis-server` on a free port, without probing for another
 * Redis first (benchmarks want their own, unshared server).
 * @throws Error with installation help when there is no `redis-server`.
 */
export async function startPrivateRedis(
  opts: Pick<EnsureRedisOptions, 'dataDir' | 'persistent' | 'redisServerBin' | 'startTimeoutMs'> & {
    /** More `redis-server` arguments (e.g. a Cluster node's). */
    extraArgs?: string[];
    /** A config file, read first (a Sentinel needs one it can rewrite). */
    configFile?: string;
    /** Highest port to listen on (a Cluster node's bus listens 10000 above and must be <= 65535). */
    maxPort?: number;
  },
): Promise<EnsuredRedis> {
  const bin = await findExecutable(opts.redisServerBin ?? 'redis-server');
  if (!bin) throw new Error(NO_REDIS_HELP);
  return startWithRetry(bin, opts);
}

// The free port can be taken between probe and bind (parallel test workers); try another.
async function startWithRetry(bin: string, opts: Parameters<typeof startPrivateRedis>[0]): Promise<EnsuredRedis> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisServer(bin, opts);
    } catch (err) {
      if (attempt >= 3 || !/address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

/** File in the data directory naming the port of the private server that owns it. */
const PORT_FILE = 'steerbot-redis.port';

/**
 * A persistent private server outlives a process killed with SIGKILL. Two
 * servers must never share one AOF directory, so a live server that owns
 * `dir` (same `CONFIG GET dir`) is adopted instead of starting a second one.
 */
async function adoptOrphan(dir: string): Promise<EnsuredRedis | undefined> {
  const port = Number(await readFile(join(dir, PORT_FILE), 'utf8').catch(() => ''));
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  const url = `redis://127.0.0.1:${port}`;
  if (!(await pingRedis(url, 500))) return undefined;
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  client.on('error', () => {});
  try {
    await client.connect();
    const reply = (await client.config('GET', 'dir')) as string[];
    if (reply[1] !== (await realpath(dir))) return undefined; // redis reports its working directory with symlinks resolved
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
  return { url, stop: () => shutdownByCommand(url, dir), started: true };
}

/** Stops a server we have no process handle for: SHUTDOWN, then wait until it no longer answers. */
async function shutdownByCommand(url: string, dir: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  await client.call('SHUTDOWN').catch(() => {}); // the server closes the connection instead of replying
  client.disconnect();
  const deadline = Date.now() + 10_000;
  while ((await pingRedis(url, 250)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await rm(join(dir, PORT_FILE), { force: true });
}

async function findExecutable(nameOrPath: string): Promise<string | undefined> {
  const candidates = nameOrPath.includes('/')
    ? [nameOrPath]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(d, nameOrPath));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      return c;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A port nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolvePort(port));
    });
  });
}

async function startRedisServer(bin: string, opts: Parameters<typeof startPrivateRedis>[0]): Promise<EnsuredRedis> {
  const dir = resolve(opts.dataDir);
  await mkdir(dir, { recursive: true });
  let port = await freePort();
  for (let tries = 1; opts.maxPort !== undefined && port > opts.maxPort; tries++) {
    if (tries >= 100) throw new Error(`no free port at or below ${opts.maxPort}`);
    port = await freePort();
  }
  const persistence = opts.persistent ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--save', '', '--appendonly', 'no'];
  const args = [
    ...(opts.configFile ? [opts.configFile] : []),
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--daemonize',
    'no',
    ...persistence,
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 50) output.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let ended = false;
  const exited = new Promise<void>((r) => {
    const done = () => {
      ended = true;
      r();
    };
    child.once('exit', done);
    child.once('error', (err) => {
      output.push(String(err));
      done();
    });
  });
  // If this process exits without calling stop(), do not leave the server behind
  // (SIGTERM, not SIGKILL: redis-server then flushes its AOF on its own).
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);

  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    process.off('exit', killOnExit);
    if (!ended) await stopChild(child, exited);
    if (opts.persistent) await rm(join(dir, PORT_FILE), { force: true });
  };
  const deadline = Date.now() + (opts.startTimeoutMs ?? 10_000);
  while (!(await pingRedis(url, 250))) {
    if (ended || Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server (${bin}) did not start on port ${port}:\n${output.join('').slice(-2000)}`);
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 50))]);
  }
  if (opts.persistent) await writeFile(join(dir, PORT_FILE), String(port));
  return { url, stop, started: true };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  child.kill('SIGTERM'); // redis-server flushes the AOF on SIGTERM
  let timer: NodeJS.Timeout | undefined;
  const forced = new Promise<void>((r) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      r();
    }, 5000);
  });
  await Promise.race([exited, forced]);
  clearTimeout(timer);
  await exited;
}
