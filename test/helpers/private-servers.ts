/**
 * Bookkeeping for tests that start several private redis-servers: one
 * temporary directory, the servers and the clients opened to them, stopped
 * and removed together.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type EnsuredRedis, startPrivateRedis } from '../../src/redis/local.js';

export class PrivateServers {
  private readonly servers: EnsuredRedis[] = [];
  private readonly clients: Redis[] = [];

  private constructor(readonly root: string) {}

  static async create(name: string): Promise<PrivateServers> {
    return new PrivateServers(await mkdtemp(join(tmpdir(), `steerbot-${name}-`)));
  }

  /** Starts one in its own subdirectory `dir` (nothing kept on disk). */
  async start(dir: string, opts: { extraArgs?: string[]; configFile?: string; maxPort?: number } = {}): Promise<EnsuredRedis> {
    const server = await startPrivateRedis({ dataDir: join(this.root, dir), persistent: false, ...opts });
    this.servers.push(server);
    return server;
  }

  /** A client of `url`, closed by `stop()`. */
  client(url: string): Redis {
    const c = new Redis(url);
    this.clients.push(c);
    return c;
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.disconnect();
    await Promise.all(this.servers.map((s) => s.stop()));
    await rm(this.root, { recursive: true, force: true });
  }
}
