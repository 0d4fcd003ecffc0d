/**
 * What a load window costs: CPU (user + system, /proc) of the bot's processes
 * and of redis-server, and the Redis commands run (INFO commandstats, a
 * script's own calls included; the meter's INFO left out).
 */
import type { Redis } from 'ioredis';
import { commandStats } from './private-redis.js';
import { cpuMs } from './processes.js';

/** A window's cost. */
export interface Metered {
  /** CPU ms of each process, in the order given. */
  cpuMs: number[];
  redisCpuMs: number;
  /** Calls per command (lower-case names). */
  commands: Map<string, number>;
}

/** Starts a window now, on the Redis `client` is connected to; the returned function ends it. */
export async function startMeter(client: Redis, pids: number[]): Promise<() => Promise<Metered>> {
  const redisPid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1] ?? 0);
  const cpu0 = pids.map(cpuMs);
  const redisCpu0 = cpuMs(redisPid);
  const calls0 = await commandStats(client);
  return async () => {
    const cpu = pids.map((pid, i) => cpuMs(pid) - cpu0[i]!);
    const redisCpuMs = cpuMs(redisPid) - redisCpu0;
    const calls = await commandStats(client);
    const commands = new Map([...calls].map(([k, v]) => [k, v - (calls0.get(k) ?? 0)] as const).filter(([k, v]) => v > 0 && k !== 'info'));
    return { cpuMs: cpu, redisCpuMs, commands };
  };
}

/** Commands per message, the most frequent first, and their sum. */
export function commandsPerMessage(commands: Map<string, number>, messages: number): { total: number; top: Array<[string, number]> } {
  const top = [...commands].map(([k, v]) => [k, v / messages] as [string, number]).sort((a, b) => b[1] - a[1]);
  return { total: top.reduce((sum, [, v]) => sum + v, 0), top };
}
