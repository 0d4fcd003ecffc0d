/**
 * Chaos: Redis restarted under load. A host process and a runner process on
 * a private redis-server with `--appendonly yes --appendfsync always`; while
 * updates keep coming, Redis is shut down gracefully (`SHUTDOWN`) and, in the
 * second test, killed with `kill -9`, then started again on the same port.
 * While it is down the host answers 503 (the load generator retries those, as
 * a platform does); host and runner recover by themselves (same processes);
 * every update acknowledged with a 2xx is answered exactly once.
 */

import type { Redis } from 'ioredis';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { type RestartableRedis, startRestartableRedis } from '../helpers/restartable-redis.js';
import { deliver, describeTally, forEachLimited, makeUpdates, quiet, StatusCounts, tally, WEBHOOK_SECRET, webhookChannel } from './harness/load.js';
import { killAll, type ProcessSettings, ready, type SteerbotProcess, startSteerbot, writeConfig } from './harness/processes.js';

const PREFIX = 'chaos-restart';
const PARTS = 2;
const CONVERSATIONS = 50;
const IN_FLIGHT = 8;
/** Updates acknowledged before the outage, and again after it, before the load stops. */
const PROGRESS = 150;
/** Most updates one test sends (the load stops by itself well before). */
const MAX_UPDATES = 5000;

let server: RestartableRedis;
let callbacks: CallbackServer;
let config: Awaited<ReturnType<typeof writeConfig>>;
let host: SteerbotProcess;
let runner: SteerbotProcess;
let observer: Redis;

// The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(async () => {
  server = await startRestartableRedis();
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  config = await writeConfig({ channels: webhookChannel(callbacks.url) });
  const settings = (name: string, role: ProcessSettings['role']): ProcessSettings => ({
    name,
    role,
    redisUrl: server.url,
    prefix: PREFIX,
    configFile: config.file,
    env: { STEERBOT_LEASE_MS: '2000', STEERBOT_HEARTBEAT_MS: '400', CHAOS_AGENT_DELAY_MS: '10', CHAOS_AGENT_PARTS: String(PARTS) },
  });
  [host, runner] = await Promise.all([startSteerbot(settings('host', 'host')), startSteerbot(settings('runner', 'runner'))]);
  // The test's own view of Redis: reconnects after each restart, never queues commands while it is down.
  observer = new IORedis(server.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, retryStrategy: () => 50 });
  observer.on('error', () => undefined);
  await waitFor(() => observer.status === 'ready', 10_000, 'the observer connected');
}, 120_000);

afterAll(async () => {
  await killAll([host, runner].filter(Boolean));
  observer?.disconnect();
  await callbacks?.close();
  await server?.destroy();
  await config?.remove();
}, 60_000);

beforeEach(async () => {
  // Each test counts only its own replies; the previous one left the system quiet.
  await waitFor(() => quiet(observer, PREFIX), 60_000, 'quiet before the test', 200);
  callbacks.requests.splice(0);
});

/**
 * Keeps updates coming while `outage` runs (it returns how long Redis was down); returns the tokens
 * acknowledged with a 2xx, and the statuses seen.
 */
async function underLoad(tag: string, outage: (progress: { acked: () => number; statuses: StatusCounts }) => Promise<number>) {
  const updates = makeUpdates(MAX_UPDATES, CONVERSATIONS, tag);
  const statuses = new StatusCounts();
  const acked: string[] = [];
  let done = false;
  let downMs = 0;
  const load = forEachLimited(updates, IN_FLIGHT, async (u) => {
    if (done) return;
    const status = await deliver(() => host.url, u.raw, statuses, 120_000);
    if (status >= 200 && status < 300) acked.push(u.token);
  });
  try {
    downMs = await outage({ acked: () => acked.length, statuses });
  } finally {
    done = true;
    await load;
  }
  return { acked, statuses, downMs };
}

/** Waits until `n` more updates than now were acknowledged. */
async function progress(p: { acked: () => number }, n: number, what: string): Promise<void> {
  const target = p.acked() + n;
  await waitFor(() => p.acked() >= target, 60_000, what, 20);
}

/**
 * 503s the host must answer before Redis comes back: with eight senders retrying every 50 ms, Redis stays
 * down for a few seconds, past the 2 s lease of the runs caught by the outage. CHAOS_OUTAGE_503S changes it.
 */
const OUTAGE_503S = Number(process.env.CHAOS_OUTAGE_503S ?? 400);

/** Waits until the host answered OUTAGE_503S more 503s than now. */
async function answered503(p: { statuses: StatusCounts }): Promise<void> {
  const target = p.statuses.get(503) + OUTAGE_503S;
  await waitFor(() => p.statuses.get(503) >= target, 60_000, `${OUTAGE_503S} answers 503 while Redis is down`, 20);
}

async function expectAnsweredOnce(tag: string, { acked, statuses, downMs }: { acked: string[]; statuses: StatusCounts; downMs: number }): Promise<void> {
  const started = Date.now();
  await waitFor(() => tally(callbacks.accepted(), acked, PARTS).missing.length === 0, 120_000, 'every acknowledged update answered', 200);
  await waitFor(() => quiet(observer, PREFIX), 60_000, 'no run active and no callback pending', 200);
  const result = tally(callbacks.accepted(), acked, PARTS);
  console.log(
    `[chaos] redis ${tag}: down ${downMs} ms; ${acked.length} updates acknowledged; statuses ${statuses}; ${describeTally(result)}; drained ${Date.now() - started} ms after the load`,
  );

  expect(statuses.get(503)).toBeGreaterThanOrEqual(OUTAGE_503S);
  // Only taken (202), duplicate (200) and unavailable (503): no other failure, no dropped connection.
  expect([...statuses.counts.keys()].filter((s) => s !== 200 && s !== 202 && s !== 503)).toEqual([]);
  expect(result.missing.slice(0, 10)).toEqual([]);
  expect(result.duplicated.slice(0, 10)).toEqual([]);
  expect(result.conflicting).toEqual([]);
  expect(result.unexpected.slice(0, 10)).toEqual([]);
  // The same processes, ready again: they recovered without a restart of their own.
  for (const p of [host, runner]) {
    expect(p.exitStatus(), `${p.name} exited:\n${p.output()}`).toBeUndefined();
    expect(await ready(p.url)).toBe(true);
  }
}

describe('chaos: Redis restarted under load', () => {
  it('after a graceful SHUTDOWN, answers every acknowledged update exactly once; 503 while it is down', async () => {
    const result = await underLoad('g', async (p) => {
      await progress(p, PROGRESS, 'updates acknowledged before the shutdown');
      const down = Date.now();
      await observer.call('SHUTDOWN').catch(() => undefined); // the connection closes as it answers
      await server.stop(); // waits for the exit
      await answered503(p);
      await server.start();
      const downMs = Date.now() - down;
      await progress(p, PROGRESS, 'updates acknowledged after the restart');
      return downMs;
    });
    await expectAnsweredOnce('graceful SHUTDOWN', result);
  }, 300_000);

  it('after kill -9 (appendfsync always), answers every acknowledged update exactly once; 503 while it is down', async () => {
    const result = await underLoad('x', async (p) => {
      await progress(p, PROGRESS, 'updates acknowledged before the kill');
      const down = Date.now();
      await server.kill9();
      await answered503(p);
      await server.start();
      const downMs = Date.now() - down;
      await progress(p, PROGRESS, 'updates acknowledged after the restart');
      return downMs;
    });
    await expectAnsweredOnce('kill -9', result);
  }, 300_000);
});
