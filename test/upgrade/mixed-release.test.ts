/**
 * A rolling upgrade in progress: a host and a runner of the previous release
 * (0.1.0, its built `dist/` in test/fixtures/releases/) beside a host and a
 * runner of this one, on one Redis, one prefix and one run queue. Every
 * update is delivered twice at once, once to each host (a platform retrying
 * while the first delivery is in flight), so both releases ingest into the
 * same conversations and both runners answer runs the other release's host
 * created. Every update must be taken once and answered exactly once: none
 * lost, none sent twice, and neither release's processes may fail.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { describeTally, forEachLimited, makeUpdates, postUpdate, quiet, StatusCounts, tally, WEBHOOK_SECRET, webhookChannel } from '../chaos/harness/load.js';
import { type SteerbotProcess, startSteerbot, tearDownSuite, writeConfig } from '../chaos/harness/processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { PrivateServers } from '../helpers/private-servers.js';

const RELEASE = '0.1.0';
const UPDATES = 600;
const CONVERSATIONS = 60;
const IN_FLIGHT = 12;
const PREFIX = 'mixed-release';
// Inside the checkout, so the release's imports resolve against this checkout's node_modules (the same dependencies).
const RELEASE_DIR = fileURLToPath(new URL(`../.releases/${RELEASE}/`, import.meta.url));
/** The suite's agent written for the previous release's runner contract. */
const PREVIOUS_AGENT = fileURLToPath(new URL(`./fixtures/chaos-agent-${RELEASE}.ts`, import.meta.url));

let servers: PrivateServers;
let redisUrl: string;
let callbacks: CallbackServer;
let config: Awaited<ReturnType<typeof writeConfig>>;
const procs: SteerbotProcess[] = [];

// The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(async () => {
  rmSync(RELEASE_DIR, { recursive: true, force: true });
  mkdirSync(RELEASE_DIR, { recursive: true });
  execFileSync('tar', ['xzf', fileURLToPath(new URL(`../fixtures/releases/steerbot-${RELEASE}.tgz`, import.meta.url)), '-C', RELEASE_DIR]);
  servers = await PrivateServers.create('mixed-release');
  redisUrl = (await servers.start('redis')).url;
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  config = await writeConfig({ channels: webhookChannel(callbacks.url) });
  const common = { redisUrl, prefix: PREFIX, configFile: config.file, env: { STEERBOT_RUNNER_CONCURRENCY: '8' } };
  // tsx (which loads the chaos agent's TypeScript) would map the release's `steerbot/*` imports to this checkout's
  // sources by the checkout's tsconfig paths; with a tsconfig of its own they resolve to the release's own dist.
  writeFileSync(`${RELEASE_DIR}tsconfig.json`, '{}\n');
  // Each release runs the plugins deployed with it: the previous one, the chaos agent as written for its runner contract.
  const previous = {
    ...common,
    cli: `${RELEASE_DIR}dist/app/cli.js`,
    env: { ...common.env, TSX_TSCONFIG_PATH: `${RELEASE_DIR}tsconfig.json`, STEERBOT_RUNNER_PLUGIN: PREVIOUS_AGENT },
  };
  procs.push(
    ...(await Promise.all([
      startSteerbot({ ...previous, name: `host-${RELEASE}`, role: 'host' }),
      startSteerbot({ ...common, name: 'host-current', role: 'host' }),
      startSteerbot({ ...previous, name: `runner-${RELEASE}`, role: 'runner' }),
      startSteerbot({ ...common, name: 'runner-current', role: 'runner' }),
    ])),
  );
}, 120_000);

afterAll(async () => {
  await tearDownSuite({ procs, callbacks, servers, config });
  rmSync(RELEASE_DIR, { recursive: true, force: true });
}, 60_000);

describe(`a rolling upgrade from ${RELEASE}`, () => {
  it(`answers each of ${UPDATES} updates, delivered to a host of each release at once, exactly once`, async () => {
    const hosts = procs.filter((p) => p.name.startsWith('host'));
    const redis = servers.client(redisUrl);
    const updates = makeUpdates(UPDATES, CONVERSATIONS, 'm');
    const statuses = new StatusCounts();
    const odd: string[] = [];
    await forEachLimited(updates, IN_FLIGHT, async (u) => {
      const got = await Promise.all(hosts.map((h) => postUpdate(h.url, u.raw)));
      for (const s of got) statuses.add(s);
      if (got.filter((s) => s === 202).length !== 1) odd.push(`${u.token}: ${got.join(',')}`);
    });
    const tokens = updates.map((u) => u.token);
    await waitFor(() => tally(callbacks.accepted(), tokens, 1).missing.length === 0, 180_000, 'every update answered', 200);
    await waitFor(() => quiet(redis, PREFIX), 60_000, 'no run active and no callback pending', 200);
    const result = tally(callbacks.accepted(), tokens, 1);
    console.log(`[upgrade] ${RELEASE} beside this release: statuses ${statuses}; ${describeTally(result)}`);

    expect(statuses.serverErrors()).toBe(0);
    expect(odd.slice(0, 10)).toEqual([]);
    expect(result.missing).toEqual([]);
    expect(result.duplicated.slice(0, 10)).toEqual([]);
    expect(result.unexpected.slice(0, 10)).toEqual([]);
    for (const p of procs) expect(p.exitStatus(), `${p.name} exited:\n${p.output()}`).toBeUndefined();
    // Both runners answered: the upgrade really was mixed.
    const owners = await runOwners(redis, PREFIX);
    expect(owners.size).toBe(2);
  }, 360_000);
});

/** The pids of the runner processes that ran the conversations' runs (owner ids are `<host>:<pid>:<worker>`). */
async function runOwners(redis: ReturnType<PrivateServers['client']>, prefix: string): Promise<Set<string>> {
  const pids = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:{c:*}:run:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const owner = await redis.hget(key, 'owner');
      if (owner) pids.add(owner.split(':')[1]!);
    }
  } while (cursor !== '0');
  return pids;
}
