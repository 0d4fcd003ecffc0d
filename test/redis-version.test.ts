/** steerbot refuses a Redis older than 7.0 at start, with the version it found, before anything starts. */

import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../app/config.js';
import { type StartHook, startApp } from '../app/start.js';
import type { HostContext, HostParts } from '../host/main.js';
import type { RunnerParts } from '../runner/main.js';
import type { AppContext } from '../src/app-context.js';
import { ConfigError } from '../src/errors.js';
import { createLogger } from '../src/logger.js';
import { closeRedis, createRedis, MIN_REDIS_VERSION, type RedisClient, requireRedisVersion } from '../src/redis/connection.js';
import { freePort } from '../src/redis/local.js';
import { redisUrl } from './helpers/redis.js';

/**
 * A server that speaks just enough RESP to be taken for a Redis of `version` by ioredis: INFO answers
 * with the version, PING with PONG, QUIT with OK and a close, anything else
 * (CLIENT SETNAME, CLIENT SETINFO) with OK.
 * It is not a Redis: no test here stores anything through it.
 */
async function oldRedis(version: string): Promise<{ url: string; commands: string[]; server: Server }> {
  const commands: string[] = [];
  const server = createServer((socket) => {
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      for (;;) {
        const parsed = parseCommand(buffer);
        if (!parsed) break;
        buffer = buffer.slice(parsed.length);
        const name = parsed.args[0]?.toUpperCase() ?? '';
        commands.push(name);
        if (name === 'INFO') {
          const body = `# Server\r\nredis_version:${version}\r\nredis_mode:standalone\r\n\r\n# Persistence\r\nloading:0\r\n`;
          socket.write(`$${Buffer.byteLength(body)}\r\n${body}\r\n`);
        } else if (name === 'PING') socket.write('+PONG\r\n');
        else if (name === 'QUIT') socket.end('+OK\r\n');
        else socket.write('+OK\r\n');
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `redis://127.0.0.1:${port}`, commands, server };
}

/** One RESP array of bulk strings from the start of `buffer`, or undefined while it is incomplete. */
function parseCommand(buffer: string): { args: string[]; length: number } | undefined {
  const head = /^\*(\d+)\r\n/.exec(buffer);
  if (!head) return undefined;
  let at = head[0].length;
  const args: string[] = [];
  for (let i = 0; i < Number(head[1]); i++) {
    const bulk = /^\$(\d+)\r\n/.exec(buffer.slice(at));
    if (!bulk) return undefined;
    const start = at + bulk[0].length;
    const end = start + Number(bulk[1]);
    if (buffer.length < end + 2) return undefined;
    args.push(buffer.slice(start, end));
    at = end + 2;
  }
  return { args, length: at };
}

const servers: Server[] = [];
const clients: RedisClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map(closeRedis));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe(`steerbot on a Redis older than ${MIN_REDIS_VERSION}`, () => {
  it('is refused with the version the server reported', async () => {
    const old = await oldRedis('6.2.14');
    servers.push(old.server);
    const client = createRedis({ url: old.url });
    clients.push(client);

    const refused = await requireRedisVersion(client).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).issues).toEqual([
      { path: 'redis', message: `steerbot needs Redis ${MIN_REDIS_VERSION} or newer; the server runs Redis 6.2.14` },
    ]);
    expect(old.commands).toContain('INFO');
  });

  it('makes startApp refuse before any role starts, and close what it opened', async () => {
    const old = await oldRedis('6.0.20');
    servers.push(old.server);
    const started: string[] = [];
    const config = { ...DEFAULT_CONFIG, redis: { ...DEFAULT_CONFIG.redis, url: old.url }, http: { ...DEFAULT_CONFIG.http, host: '127.0.0.1', port: 0 } };
    const startRunner: StartHook<AppContext, RunnerParts> = async () => {
      started.push('runner');
      return { stop: async () => {} };
    };
    const startHost: StartHook<HostContext, HostParts> = async () => {
      started.push('host');
      return { stop: async () => {} };
    };

    await expect(startApp({ config, logger: createLogger({ level: 'silent' }), hooks: { startRunner, startHost } })).rejects.toThrow(
      /Redis 7\.0 or newer; the server runs Redis 6\.0\.20/,
    );
    expect(started).toEqual([]);
    // The process's client said goodbye: QUIT reached the server.
    expect(old.commands).toContain('QUIT');
  });
});

describe(`steerbot on Redis ${MIN_REDIS_VERSION} or newer`, () => {
  it('starts: the check passes on the Redis the tests run', async () => {
    const client = createRedis({ url: redisUrl() });
    clients.push(client);
    await expect(requireRedisVersion(client)).resolves.toMatch(/^\d+\.\d+/);
  });

  it('does not refuse a Redis that does not answer: the outage is reported elsewhere', async () => {
    const client = createRedis({ url: `redis://127.0.0.1:${await freePort()}`, failFastMs: 200 });
    clients.push(client);
    await expect(requireRedisVersion(client, 1000)).resolves.toBeUndefined();
  });
});
