/**
 * A private three-master Redis Cluster on free ports, for the tests that run
 * the system in `cluster` mode. Needs `redis-server` (fails with how to get
 * it otherwise); the nodes keep nothing on disk and stop with `stop()`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startPrivateRedis, type EnsuredRedis } from '../../src/local-redis.js';
import { waitFor } from './wait.js';

export interface PrivateCluster {
  /** `host:port` of every master, for `REDIS_CLUSTER_NODES`. */
  nodes: string[];
  stop(): Promise<void>;
}

const SLOTS = 16384;

export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const root = await mkdtemp(join(tmpdir(), 'steerbot-cluster-'));
  const servers: EnsuredRedis[] = [];
  const clients: Redis[] = [];
  const stop = async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
    await rm(root, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      servers.push(
        await startPrivateRedis({ dataDir: join(root, String(i)), persistent: false, extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] }),
      );
    }
    const nodes = servers.map((s) => new URL(s.url).host);
    clients.push(...servers.map((s) => new Redis(s.url)));
    // Each master takes an equal range of slots, then they meet.
    const per = Math.ceil(SLOTS / masters);
    await Promise.all(clients.map((c, i) => c.call('CLUSTER', 'ADDSLOTSRANGE', i * per, Math.min(SLOTS, (i + 1) * per) - 1)));
    for (const node of nodes.slice(1)) {
      const [host, port] = node.split(':');
      await clients[0]!.call('CLUSTER', 'MEET', host!, port!);
    }
    await waitFor(
      async () => {
        const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
        return infos.every((i) => i.includes('cluster_state:ok') && i.includes(`cluster_known_nodes:${masters}`)) || undefined;
      },
      15_000,
      'the private cluster to agree on its slots',
    );
    return { nodes, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
