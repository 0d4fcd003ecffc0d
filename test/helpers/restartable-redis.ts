/**
 * A private redis-server that a test can stop and start again on the same
 * port (clients reconnect to the same URL), with `appendfsync always` so a
 * graceful stop or a `kill -9` keeps every acknowledged write.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pingRedis } from '../../src/redis/connection.js';
import { freePort } from '../../src/redis/local.js';

export interface RestartableRedis {
  url: string;
  /** Whether the server runs now. */
  readonly running: boolean;
  /** Graceful stop (SIGTERM: the server flushes and exits); resolves once it has exited. */
  stop(): Promise<void>;
  /** `kill -9`; resolves once it has exited. */
  kill9(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it answers PING. */
  start(): Promise<void>;
  /** Stops it for good and removes its data. */
  destroy(): Promise<void>;
}

export async function startRestartableRedis(): Promise<RestartableRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'steerbot-restartable-'));
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'];
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    child = proc;
    exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    const deadline = Date.now() + 10_000;
    while (!(await pingRedis(url, 250))) {
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const signal = async (sig: NodeJS.Signals) => {
    const proc = child;
    child = undefined;
    if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill(sig);
    await exited;
  };
  await start();
  return {
    url,
    get running() {
      return child !== undefined;
    },
    stop: () => signal('SIGTERM'),
    kill9: () => signal('SIGKILL'),
    start,
    async destroy() {
      await signal('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    },
  };
}
