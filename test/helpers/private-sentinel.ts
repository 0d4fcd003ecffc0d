/**
 * A private Redis master, its replica and one Sentinel watching them, for
 * the tests that run the system in `sentinel` mode. Needs `redis-server`
 * (fails with how to get it otherwise); nothing is kept on disk.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { waitFor } from '../../testing/wait.js';
import { PrivateServers } from './private-servers.js';

export const SENTINEL_MASTER_NAME = 'steerbot-test';

export interface PrivateSentinel {
  /** `host:port` of the Sentinel, for `REDIS_SENTINELS`. */
  sentinels: string[];
  name: string;
  /** `host:port` of the current master, as the Sentinel reports it. */
  master(): Promise<string>;
  /** Makes the replica the master (`SENTINEL FAILOVER`) and waits until the Sentinel reports it. */
  failover(): Promise<string>;
  stop(): Promise<void>;
}

export async function startPrivateSentinel(): Promise<PrivateSentinel> {
  const group = await PrivateServers.create('sentinel');
  try {
    const master = await group.start('master');
    const masterAt = new URL(master.url);
    await group.start('replica', { extraArgs: ['--replicaof', masterAt.hostname, masterAt.port] });
    const conf = join(group.root, 'sentinel.conf');
    await writeFile(
      conf,
      [
        `sentinel monitor ${SENTINEL_MASTER_NAME} ${masterAt.hostname} ${masterAt.port} 1`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} 2000`,
        `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 10000`,
        '',
      ].join('\n'),
    );
    const sentinel = await group.start('sentinel', { configFile: conf, extraArgs: ['--sentinel'] });
    const admin = group.client(sentinel.url);
    const masterAddr = async () => ((await admin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER_NAME)) as string[]).join(':');
    // The Sentinel has found the replica (it must, to fail over to it).
    await waitFor(
      async () => ((await admin.call('SENTINEL', 'REPLICAS', SENTINEL_MASTER_NAME)) as unknown[]).length > 0 || undefined,
      15_000,
      'the Sentinel to find the replica',
    );
    return {
      sentinels: [new URL(sentinel.url).host],
      name: SENTINEL_MASTER_NAME,
      master: masterAddr,
      async failover() {
        const before = await masterAddr();
        // Refused (NOGOODSLAVE) until the Sentinel has seen the replica in sync: ask again.
        await waitFor(
          async () =>
            (await admin.call('SENTINEL', 'FAILOVER', SENTINEL_MASTER_NAME).then(
              () => true,
              () => false,
            )) || undefined,
          15_000,
          'the Sentinel to accept a failover',
          200,
        );
        return waitFor(
          async () => {
            const now = await masterAddr();
            return now !== before ? now : undefined;
          },
          20_000,
          'the Sentinel to report the new master',
        );
      },
      stop: () => group.stop(),
    };
  } catch (err) {
    await group.stop();
    throw err;
  }
}
