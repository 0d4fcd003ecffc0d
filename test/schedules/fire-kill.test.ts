/**
 * Exactly one fire per tick across processes and crashes: two fire-serving
 * processes share the schedules of many conversations; the first process to
 * ingest a fire is killed with `kill -9` right after ingesting it, before
 * BullMQ hears the job is done, and a replacement starts (a restart). The
 * dead process's fire is redelivered to another process and deduped; every
 * one-shot and every tick of the recurring schedule becomes exactly one
 * input, and no conversation gets a second run beside its active one.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { Schedules } from '../../src/schedules/schedules.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, builtNodeArgs, packageBuilt } from '../helpers/built-package.js';
import { readyLine } from '../helpers/child-ready.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/fire-process.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CONVERSATIONS = 10;
const ONE_SHOTS_EACH = 3;

let redis: Redis;
const prefix = testPrefix();
const pauseKey = `${prefix}:test:paused`;
const children = new Set<ChildProcess>();

async function startFireProcess(): Promise<ChildProcess> {
  const proc = spawn(process.execPath, await builtNodeArgs(FIXTURE), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', REDIS_URL: redisUrl(), PREFIX: prefix, PAUSE_KEY: pauseKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  await readyLine(proc, 'fire process', 60_000);
  return proc;
}

async function kill9(proc: ChildProcess): Promise<void> {
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGKILL');
  await exited;
}

// The child processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await cleanupPrefix(redis, prefix);
  await cleanupPrefix(redis, bullPrefixFor(prefix));
  await redis.quit();
});

describe('schedule fires under kill -9', () => {
  it('every one-shot and every tick becomes exactly one input', async () => {
    const procs = await Promise.all([startFireProcess(), startFireProcess()]);
    const schedules = new Schedules({
      client: redis,
      prefix,
      connection: new Redis(redisUrl(), { maxRetriesPerRequest: null }),
      bullPrefix: bullPrefixFor(prefix),
      limits: { minIntervalSeconds: 1 },
    });
    try {
      // All one-shots due in the same second; one recurring schedule ticking every second.
      const at = new Date(Math.ceil((Date.now() + 2000) / 1000) * 1000).toISOString();
      const oneShots: Array<{ conversationId: string; id: string }> = [];
      for (let c = 0; c < CONVERSATIONS; c++) {
        for (let i = 0; i < ONE_SHOTS_EACH; i++) {
          const s = await schedules.create(`telegram:${c}`, { at, prompt: `reminder ${c}.${i}` }, { createdBy: 'test' });
          oneShots.push({ conversationId: s.conversationId, id: s.id });
        }
      }
      const recurring = await schedules.create('telegram:r', { every: '1s', prompt: 'tick' }, { createdBy: 'test' });

      // The first process to ingest a fire stops there; kill it at that moment, and start a replacement.
      const paused = await waitFor(() => redis.get(pauseKey), 30_000, 'a fire ingested by a process that then stops');
      const pid = Number(paused.split(' ')[0]);
      const victim = procs.find((p) => p.pid === pid)!;
      expect(victim).toBeDefined();
      await kill9(victim);
      await startFireProcess();

      // Every one-shot fired (its record is gone once handled) and the recurring schedule ticked on.
      await waitFor(
        async () => (await Promise.all(oneShots.map((s) => schedules.get(s.conversationId, s.id)))).every((s) => s === undefined),
        60_000,
        'every one-shot handled',
      );
      await waitFor(async () => (await originsOf('telegram:r')).length >= 4, 30_000, 'four ticks of the recurring schedule');

      for (let c = 0; c < CONVERSATIONS; c++) {
        const got = await originsOf(`telegram:${c}`);
        const mine = oneShots.filter((s) => s.conversationId === `telegram:${c}`).map((s) => s.id);
        expect(got.map((o) => o.source).sort()).toEqual(mine.sort());
        // No runner takes runs here: the first input started one run, the others joined it.
        const runs = await redis.zcard(conversationKeys(prefix, `telegram:${c}`).runs);
        expect(runs).toBe(1);
      }
      const ticks = (await originsOf('telegram:r')).map((o) => o.id);
      expect(new Set(ticks).size).toBe(ticks.length);
      expect(ticks.every((t, i) => i === 0 || Number(t) > Number(ticks[i - 1]))).toBe(true);
      expect((await originsOf('telegram:r')).every((o) => o.source === recurring.id)).toBe(true);
      // The fire the killed process had ingested is among them, once.
      const killedKey = paused.split(' ')[1]!;
      const [, source, tick] = killedKey.split(':');
      const conversation = source === recurring.id ? 'telegram:r' : oneShots.find((s) => s.id === source)!.conversationId;
      expect((await originsOf(conversation)).filter((o) => o.source === source && o.id === tick)).toHaveLength(1);
    } finally {
      await schedules.close();
    }
  }, 180_000);
});

async function originsOf(conversationId: string): Promise<Array<{ kind: string; source: string; id: string }>> {
  const entries = await readRange(redis, conversationKeys(prefix, conversationId).log);
  return entries.flatMap((e) => {
    const origin = (e as { origin?: { kind: string; source: string; id: string } }).origin;
    return e.kind === 'message.received' && origin ? [origin] : [];
  });
}
