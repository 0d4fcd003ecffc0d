/**
 * Chaos: a duplicate storm. Two host processes and two runner processes on
 * one private Redis; every update is delivered three times at once, spread
 * over both hosts (a platform retrying while the first delivery is still in
 * flight). Every update must be taken once (one 202, the others 200
 * duplicate) and answered exactly once at the callback receiver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { PrivateServers } from '../helpers/private-servers.js';
import { describeTally, forEachLimited, makeUpdates, postUpdate, quiet, StatusCounts, tally, WEBHOOK_SECRET, webhookChannel } from './harness/load.js';
import { type SteerbotProcess, startSteerbot, tearDownSuite, writeConfig } from './harness/processes.js';

/** Updates and concurrent deliveries of each; CHAOS_SCALE (0-1] scales the updates down on a slow machine. */
const SCALE = Math.min(1, Number(process.env.CHAOS_SCALE ?? 1));
const UPDATES = Math.round(3000 * SCALE);
const DELIVERIES = 3;
const CONVERSATIONS = 300;
/** Updates in flight at once (each with its three deliveries). */
const IN_FLIGHT = 16;
const PREFIX = 'chaos-storm';

let servers: PrivateServers;
let redisUrl: string;
let callbacks: CallbackServer;
let config: Awaited<ReturnType<typeof writeConfig>>;
const procs: SteerbotProcess[] = [];

// The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(async () => {
  servers = await PrivateServers.create('chaos-storm');
  redisUrl = (await servers.start('redis')).url;
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  config = await writeConfig({ channels: webhookChannel(callbacks.url) });
  const common = { redisUrl, prefix: PREFIX, configFile: config.file, env: { STEERBOT_RUNNER_CONCURRENCY: '8' } };
  procs.push(
    ...(await Promise.all([
      startSteerbot({ ...common, name: 'host-a', role: 'host' }),
      startSteerbot({ ...common, name: 'host-b', role: 'host' }),
      startSteerbot({ ...common, name: 'runner-a', role: 'runner' }),
      startSteerbot({ ...common, name: 'runner-b', role: 'runner' }),
    ])),
  );
}, 120_000);

afterAll(() => tearDownSuite({ procs, callbacks, servers, config }), 60_000);

describe('chaos: duplicate storm', () => {
  it(`answers each of ${UPDATES} updates delivered ${DELIVERIES}× at once across two hosts exactly once`, async () => {
    const hosts = procs.filter((p) => p.name.startsWith('host'));
    const redis = servers.client(redisUrl);
    const updates = makeUpdates(UPDATES, CONVERSATIONS, 's');
    const statuses = new StatusCounts();
    /** Per update: how many of its deliveries were taken (202) and how many were duplicates (200). */
    const oddUpdates: string[] = [];
    const started = Date.now();
    await forEachLimited(updates, IN_FLIGHT, async (u, i) => {
      // Spread: first delivery alternates hosts, the other two go one to each.
      const targets = Array.from({ length: DELIVERIES }, (_, d) => hosts[(i + d) % hosts.length]!.url);
      const got = await Promise.all(targets.map((url) => postUpdate(url, u.raw)));
      for (const s of got) statuses.add(s);
      const taken = got.filter((s) => s === 202).length;
      const duplicates = got.filter((s) => s === 200).length;
      if (taken !== 1 || duplicates !== DELIVERIES - 1) oddUpdates.push(`${u.token}: ${got.join(',')}`);
    });
    const ingestMs = Date.now() - started;

    await waitFor(
      () =>
        tally(
          callbacks.accepted(),
          updates.map((u) => u.token),
          1,
        ).missing.length === 0,
      180_000,
      'every update answered',
      200,
    );
    await waitFor(() => quiet(redis, PREFIX), 60_000, 'no run active and no callback pending', 200);
    const result = tally(
      callbacks.accepted(),
      updates.map((u) => u.token),
      1,
    );
    const totalMs = Date.now() - started;
    console.log(
      `[chaos] duplicate storm: scale ${SCALE} (${UPDATES} updates × ${DELIVERIES} deliveries, ${CONVERSATIONS} conversations, 2 hosts + 2 runners); ` +
        `statuses ${statuses}; ${describeTally(result)}; ingest ${ingestMs} ms, all answered ${totalMs} ms`,
    );

    expect(statuses.serverErrors()).toBe(0);
    expect(statuses.get(0)).toBe(0);
    expect(oddUpdates.slice(0, 10)).toEqual([]);
    expect(result.missing).toEqual([]);
    expect(result.duplicated.slice(0, 10)).toEqual([]);
    expect(result.repeatedPosts).toBe(0);
    expect(result.unexpected.slice(0, 10)).toEqual([]);
    for (const p of procs) expect(p.exitStatus(), `${p.name} exited:\n${p.output()}`).toBeUndefined();
  }, 360_000);
});
