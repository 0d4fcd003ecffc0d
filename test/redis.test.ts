import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../app/config.js';
import { ConfigError } from '../src/errors.js';
import { closeRedis, createRedis, pingRedis, type RedisClient, redisFromConfig, redisOptionsFromConfig, redisSummary } from '../src/redis/connection.js';
import { freePort } from '../src/redis/local.js';
import { cleanupPrefix, redisUrl, testPrefix } from './helpers/redis.js';

const openSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

const clients: RedisClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map(closeRedis));
});

describe('pingRedis', () => {
  it('is true for a live Redis and leaves no socket open', async () => {
    const before = openSockets();
    expect(await pingRedis(redisUrl(), 1000)).toBe(true);
    expect(openSockets()).toBe(before);
  });

  it('is false for a closed port, quickly, and leaves no socket open', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const before = openSockets();
    const t0 = Date.now();
    expect(await pingRedis(url, 1000)).toBe(false);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(openSockets()).toBe(before);
  });

  it('is false within the timeout for a peer that never answers', async () => {
    const { createServer } = await import('node:net');
    const silent = createServer((s) => s.resume()); // accepts and reads, never replies
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    try {
      const t0 = Date.now();
      expect(await pingRedis(`redis://127.0.0.1:${port}`, 300)).toBe(false);
      expect(Date.now() - t0).toBeLessThan(1500);
    } finally {
      // close() only completes once pingRedis has dropped its socket.
      await new Promise((r) => silent.close(r));
    }
  });

  it('is false for a malformed URL instead of throwing', async () => {
    expect(await pingRedis('redis://[not-a-host', 200)).toBe(false);
  });
});

describe('createRedis', () => {
  it('connects by URL with legacy reply shapes (maps as flat arrays) over RESP3', async () => {
    const client = createRedis({ url: redisUrl() });
    clients.push(client);
    const prefix = testPrefix();
    await client.hset(`${prefix}:h`, 'a', '1');
    // HELLO 3 was negotiated, yet a map reply still arrives as a flat array.
    const hello = (await client.call('HELLO')) as unknown[];
    expect(Array.isArray(hello)).toBe(true);
    expect(hello[hello.indexOf('proto') + 1]).toBe(3);
    expect(await client.call('HGETALL', `${prefix}:h`)).toEqual(['a', '1']);
    expect(await cleanupPrefix(client, prefix)).toBe(1);
  });

  it('sets maxRetriesPerRequest to null only for BullMQ connections', () => {
    const plain = createRedis({ url: redisUrl() }) as Redis;
    const bull = createRedis({ url: redisUrl(), forBullmq: true }) as Redis;
    clients.push(plain, bull);
    expect(plain.options.maxRetriesPerRequest).toBe(20);
    expect(bull.options.maxRetriesPerRequest).toBeNull();
    expect(bull.options.connectionName).toBe('steerbot');
  });

  it('returns a given client as is', () => {
    const client = new Redis(redisUrl(), { lazyConnect: true });
    expect(createRedis({ client })).toBe(client);
    client.disconnect();
  });

  it('builds sentinel and cluster clients without connecting them', () => {
    const sentinel = createRedis({ mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: 1 }], name: 'mymaster', password: 'pw' }) as Redis;
    expect(sentinel.options.name).toBe('mymaster');
    expect(sentinel.options.password).toBe('pw');
    sentinel.on('error', () => {});
    sentinel.disconnect();
    const cluster = createRedis({ mode: 'cluster', nodes: [{ host: '127.0.0.1', port: 1 }], forBullmq: true });
    expect(cluster.isCluster).toBe(true);
    cluster.on('error', () => {});
    cluster.disconnect();
  });
});

describe('redisOptionsFromConfig', () => {
  it('uses the config URL, else the given one, else refuses', () => {
    expect(redisOptionsFromConfig({ ...DEFAULT_CONFIG.redis, url: 'redis://a:1' }, { url: 'redis://b:2' })).toEqual({ url: 'redis://a:1' });
    expect(redisOptionsFromConfig(DEFAULT_CONFIG.redis, { url: 'redis://b:2', forBullmq: true })).toEqual({ url: 'redis://b:2', forBullmq: true });
    expect(() => redisOptionsFromConfig(DEFAULT_CONFIG.redis)).toThrow(ConfigError);
  });

  it('maps sentinel and cluster sections', () => {
    const nodes = [{ host: 'h', port: 26379 }];
    expect(redisOptionsFromConfig({ ...DEFAULT_CONFIG.redis, mode: 'sentinel', sentinels: nodes, sentinelName: 'm', password: 'p' })).toEqual({
      mode: 'sentinel',
      sentinels: nodes,
      name: 'm',
      password: 'p',
    });
    expect(redisOptionsFromConfig({ ...DEFAULT_CONFIG.redis, mode: 'cluster', clusterNodes: nodes })).toEqual({ mode: 'cluster', nodes });
  });

  it('redisFromConfig gives a working client', async () => {
    const client = redisFromConfig(DEFAULT_CONFIG.redis, { url: redisUrl() });
    clients.push(client);
    expect(await client.ping()).toBe('PONG');
  });
});

describe('redisSummary', () => {
  it('never shows a password', () => {
    expect(redisSummary({ url: 'redis://user:hunter2@db:6380/1' })).toBe('single redis://user:redacted@db:6380/1');
    expect(redisSummary({ url: 'redis://:hunter2@db:6380', password: 'x' })).not.toContain('hunter2');
    expect(redisSummary({ mode: 'sentinel', name: 'mymaster', sentinels: [{ host: 's1', port: 26379 }], password: 'pw' })).toBe(
      'sentinel mymaster via s1:26379',
    );
    expect(
      redisSummary({
        mode: 'cluster',
        nodes: [
          { host: 'c1', port: 7000 },
          { host: 'c2', port: 7001 },
        ],
      }),
    ).toBe('cluster via c1:7000,c2:7001');
  });
});
