/**
 * A private, non-persistent redis-server on a free port for benchmarks, so
 * command counts are not polluted by other clients of a shared Redis.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Starts redis-server; falls back to REDIS_URL / 6379 (shared, counts may include others) when it is not installed. */
export async function privateRedis(): Promise<{ url: string; shared: boolean; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const failed = new Promise<false>((resolve) => child.once('error', () => resolve(false)));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 5000;
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => undefined);
    const ok = await Promise.race([probe.connect().then(() => probe.ping()).then(() => true, () => false), failed]);
    probe.disconnect();
    if (ok) break;
    if (child.exitCode !== null || child.killed || Date.now() > deadline || (await Promise.race([failed, Promise.resolve(true)])) === false) {
      child.kill();
      return { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', shared: true, stop: async () => undefined };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    shared: false,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** Sum of `calls` in INFO commandstats for the given commands. */
export async function commandCalls(client: Redis, commands: string[]): Promise<number> {
  const info = await client.info('commandstats');
  let total = 0;
  for (const c of commands) {
    const m = new RegExp(`^cmdstat_${c}:calls=(\\d+)`, 'm').exec(info);
    if (m) total += Number(m[1]);
  }
  return total;
}

/** Counts commands the client writes (each is one request on the wire; pipelining batches them). */
export function countSent(client: Redis): { count(): number } {
  let n = 0;
  const orig = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof orig>) => {
    n++;
    return orig(...args);
  }) as typeof client.sendCommand;
  return { count: () => n };
}
