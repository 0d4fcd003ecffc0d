/**
 * A private three-master Redis Cluster on free ports, for the tests that run
 * the system in `cluster` mode. Needs `redis-server` (fails with how to get
 * it otherwise); the nodes keep nothing on disk and stop with `stop()`.
 */

import { waitFor } from '../../testing/wait.js';
import { PrivateServers } from './private-servers.js';

export interface PrivateCluster {
  /** `host:port` of every master, for `REDIS_CLUSTER_NODES`. */
  nodes: string[];
  stop(): Promise<void>;
}

const SLOTS = 16384;

export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const group = await PrivateServers.create('cluster');
  try {
    const servers = [];
    // A node's cluster bus listens 10000 above its port.
    for (let i = 0; i < masters; i++)
      servers.push(await group.start(String(i), { maxPort: 55_535, extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] }));
    const nodes = servers.map((s) => new URL(s.url).host);
    const clients = servers.map((s) => group.client(s.url));
    // Each master takes an equal range of slots (ADDSLOTS, not ADDSLOTSRANGE: Redis before 7 has only the former), then they meet.
    const per = Math.ceil(SLOTS / masters);
    await Promise.all(
      clients.map((c, i) => {
        const first = i * per;
        const slots = Array.from({ length: Math.min(SLOTS, first + per) - first }, (_, j) => first + j);
        return c.call('CLUSTER', 'ADDSLOTS', ...slots);
      }),
    );
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
    return { nodes, stop: () => group.stop() };
  } catch (err) {
    await group.stop();
    throw err;
  }
}
