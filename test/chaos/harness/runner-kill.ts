/**
 * Chaos: runner processes killed with `kill -9` while they hold a run, under
 * steady load. One host, three runner processes (each killed one replaced by
 * a new process), a short lease so takeovers are quick. Two agents, each
 * killed ten times:
 * - `collect`: answers in two parts with a pause before each, so kills land
 *   before, between and after deliveries (a takeover must not send a part
 *   again);
 * - `steer`: a steering agent with few conversations, so messages are steered
 *   into running runs; it records its answer as a step before delivering it,
 *   so kills land between "answer recorded" and "delivered" (a takeover must
 *   deliver the recorded answer, and answer the steered messages a dead
 *   attempt took).
 * Every update must be answered exactly once in each part: none lost, none
 * sent twice. The agents' files: runner-kill-collect.test.ts, runner-kill-steer.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRange } from '../../../src/record/read.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { activeKeyPattern, conversationIdFromKey, conversationKeys } from '../../../src/redis/keys.js';
import { type CallbackServer, startCallbackServer } from '../../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../../testing/wait.js';
import { BUILD_WAIT_MS, packageBuilt } from '../../helpers/built-package.js';
import { PrivateServers } from '../../helpers/private-servers.js';
import {
  AnswerIndex,
  CHANNEL,
  deliver,
  describeTally,
  forEachLimited,
  makeUpdates,
  quiet,
  StatusCounts,
  tally,
  WEBHOOK_SECRET,
  webhookChannel,
} from './load.js';
import { type ProcessSettings, type SteerbotProcess, startSteerbot, tearDownSuite, writeConfig } from './processes.js';

const KILLS = 10;
const RUNNERS = 3;
/** Most updates the load sends; it stops earlier once every kill was made. */
const MAX_UPDATES = 3000;
const LEASE_MS = 1500;

/** One agent: `inFlight` updates wait for their answer at any time (a closed loop: each sender waits for its answer before the next). */
interface KillMode {
  mode: string;
  steering: boolean;
  parts: number;
  conversations: number;
  inFlight: number;
}

/** Pids of the runner processes that own a running run now (owner ids are `<host>:<pid>:<worker>`). */
async function pidsHoldingRuns(redis: RedisClient, prefix: string): Promise<Set<number>> {
  const pids = new Set<number>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', activeKeyPattern(prefix), 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const runId = await redis.get(key);
      if (!runId || conversationIdFromKey(prefix, key) === undefined) continue;
      const [state, owner] = await redis.hmget(`${key.slice(0, -'active'.length)}run:${runId}`, 'state', 'owner');
      if (state === 'running' && owner) pids.add(Number(owner.split(':').at(-2)));
    }
  } while (cursor !== '0');
  return pids;
}

/** Runs acquired more than once (a later attempt took over from a killed runner). */
async function runsTakenOver(redis: RedisClient, prefix: string): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:{c:*}:run:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) if (Number(await redis.hget(key, 'attempt')) > 1) n++;
  } while (cursor !== '0');
  return n;
}

/** The suite for one agent; each agent has its own test file, so the lane's workers run them at once. */
export function runnerKillSuite(m: KillMode): void {
  // The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
  beforeAll(packageBuilt, BUILD_WAIT_MS);

  describe(`chaos: runner kill -9 (${m.mode} agent)`, () => {
    const prefix = `chaos-kill-${m.mode}`;
    let servers: PrivateServers;
    let redisUrl: string;
    let callbacks: CallbackServer;
    let config: Awaited<ReturnType<typeof writeConfig>>;
    const procs: SteerbotProcess[] = [];

    const settings = (name: string, role: ProcessSettings['role']): ProcessSettings => ({
      name,
      role,
      redisUrl,
      prefix,
      configFile: config.file,
      env: {
        STEERBOT_LEASE_MS: String(LEASE_MS),
        STEERBOT_HEARTBEAT_MS: '300',
        STEERBOT_RUNNER_CONCURRENCY: '4',
        CHAOS_AGENT_DELAY_MS: '100',
        CHAOS_AGENT_PARTS: String(m.parts),
        CHAOS_AGENT_STEERING: String(m.steering),
      },
    });

    beforeAll(async () => {
      servers = await PrivateServers.create(prefix);
      redisUrl = (await servers.start('redis')).url;
      callbacks = await startCallbackServer(WEBHOOK_SECRET);
      config = await writeConfig({ channels: webhookChannel(callbacks.url) });
      procs.push(
        ...(await Promise.all([
          startSteerbot(settings('host', 'host')),
          ...Array.from({ length: RUNNERS }, (_, i) => startSteerbot(settings(`runner-${i}`, 'runner'))),
        ])),
      );
    }, 120_000);

    afterAll(() => tearDownSuite({ procs, callbacks, servers, config }), 60_000);

    it(`loses and duplicates nothing when ${KILLS} runners holding runs are killed under steady load`, async () => {
      const redis = servers.client(redisUrl);
      const host = procs[0]!;
      const updates = makeUpdates(MAX_UPDATES, m.conversations, 'k');
      const statuses = new StatusCounts();
      const sent: string[] = [];
      let killsDone = 0;
      const kills: string[] = [];
      const replacements: Array<Promise<void>> = [];

      const killer = (async () => {
        for (let k = 1; k <= KILLS; k++) {
          const victim = await waitFor(
            async () => {
              const live = procs.filter((p) => p.name.startsWith('runner') && !p.exited);
              // Never the last runner standing: the load keeps flowing while a replacement starts.
              if (live.length < 2) return undefined;
              const holding = await pidsHoldingRuns(redis, prefix);
              return live.find((p) => holding.has(p.pid));
            },
            120_000,
            `a live runner holding a run (kill ${k})`,
            20,
          );
          await victim.kill9();
          kills.push(`${victim.name} (pid ${victim.pid})`);
          killsDone = k;
          // A new process takes its place; the other two carry the load (and the takeovers) meanwhile.
          replacements.push(startSteerbot(settings(`runner-${RUNNERS + k - 1}`, 'runner')).then((p) => void procs.push(p)));
        }
      })();
      // A killer that gave up stops the load too (the test fails at `await killer`).
      let killerFailed = false;
      killer.catch(() => (killerFailed = true));
      // Steady load until the last kill (bounded by MAX_UPDATES): each sender waits for its update's answer before the next.
      const answers = new AnswerIndex(callbacks);
      await forEachLimited(updates, m.inFlight, async (u) => {
        if (killsDone >= KILLS || killerFailed) return;
        const status = await deliver(() => host.url, u.raw, statuses);
        if (status !== 202) throw new Error(`update ${u.token} answered ${status}`);
        sent.push(u.token);
        await waitFor(() => answers.answered(u.token, m.parts), 60_000, `the answer to ${u.token}`, 10);
      });
      await killer;
      await Promise.all(replacements);

      const started = Date.now();
      await waitFor(() => tally(callbacks.accepted(), sent, m.parts).missing.length === 0, 120_000, 'every update answered', 200);
      await waitFor(() => quiet(redis, prefix), 60_000, 'no run active and no callback pending', 200);
      const result = tally(callbacks.accepted(), sent, m.parts);
      const takeovers = await runsTakenOver(redis, prefix);
      let steered = 0;
      for (let c = 0; c < m.conversations; c++) {
        const log = conversationKeys(prefix, `${CHANNEL}:k-c${c}`).log;
        for (const e of await readRange(redis, log)) if (e.kind === 'steering.injected') steered += e.seqs.length;
      }
      console.log(
        `[chaos] runner kill -9, ${m.mode} agent: ${kills.length} kills (${kills.join(', ')}), ${sent.length} updates in ${m.conversations} conversations, ` +
          `${m.parts} part(s) each, lease ${LEASE_MS} ms; ${takeovers} runs taken over; ${steered} messages steered into running runs; ` +
          `statuses ${statuses}; ${describeTally(result)}; drained ${Date.now() - started} ms after the load`,
      );

      expect(kills).toHaveLength(KILLS);
      // Each victim held a run when it was killed; one finishing in the instant between the check and the kill needs no takeover.
      expect(takeovers).toBeGreaterThan(0);
      if (m.steering) expect(steered).toBeGreaterThan(0);
      expect(statuses.serverErrors()).toBe(0);
      expect(sent.length).toBeGreaterThan(0);
      expect(result.missing.slice(0, 10)).toEqual([]);
      expect(result.duplicated.slice(0, 10)).toEqual([]);
      expect(result.repeatedPosts).toBe(0);
      expect(result.conflicting).toEqual([]);
      expect(result.unexpected.slice(0, 10)).toEqual([]);
      expect(host.exitStatus(), `host exited:\n${host.output()}`).toBeUndefined();
    }, 360_000);
  });
}
