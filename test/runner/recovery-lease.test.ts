/**
 * Recovery is bounded by the run lease, not by BullMQ's old fixed 30 s job
 * lock and 15 s stall check: two runner processes, the one holding a run is
 * killed (`kill -9`) in the middle of its model call, and the other takes the
 * run over and answers once, well before the old lock would even have lapsed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { CID, RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { recordedSends, startRunnerProcess } from '../fixtures/runner-processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl } from '../helpers/redis.js';
import { perTestModel } from './harness.js';

const LEASE_MS = 2000;
const HEARTBEAT_MS = 600;
/** BullMQ's lock before recovery followed the lease: a dead runner's job waited at least this long. */
const OLD_LOCK_MS = 30_000;

// The runner processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

const t = perTestModel();

const userText = (body: { messages: Array<{ role: string; content: unknown }> }) =>
  body.messages
    .filter((m) => m.role === 'user')
    .map((m) => String(m.content))
    .at(-1);

describe('a runner killed mid model call', () => {
  it('has its run taken over by the surviving runner within the lease, answered exactly once', async () => {
    const { fake, procs } = t;
    // The first call for a question hangs (until its client dies); a repeated call answers.
    const asked = new Set<string>();
    fake.script((req) => {
      const q = userText(req) ?? '';
      if (!asked.has(q)) {
        asked.add(q);
        return { text: 'never sent', delayMs: 120_000 };
      }
      return { text: `answer to ${q}` };
    });
    const h = (t.h = await RunnerHarness.start({ redisUrl: redisUrl() }));
    const settings = { redisUrl: redisUrl(), prefix: h.prefix, leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS, modelUrl: fake.url };
    procs.push(...(await Promise.all([startRunnerProcess(settings), startRunnerProcess(settings)])));

    const first = await h.ingest('what is the time?');
    expect(first.kind).toBe('new-run');
    const runId = (first as { runId: string }).runId;
    await fake.waitForRequests(1, 15_000);
    const status = await h.dispatch.status(CID);
    expect(status).toMatchObject({ activeRunId: runId, runState: 'running', attempt: 1 });
    const holder = procs.find((p) => p.owner === status.owner)!;
    const survivor = procs.find((p) => p !== holder)!;
    expect(holder).toBeDefined();

    await holder.kill9();
    // Generous, and still well inside the 30 s lock a dead runner's job used to keep.
    const deadline = LEASE_MS + 15_000;
    expect(deadline).toBeLessThan(OLD_LOCK_MS);
    const ended = await h.runEnded(runId, deadline);
    expect(ended.outcome).toBe('completed');

    // Re-acquired by the survivor, with a higher fencing token; the dead attempt never wrote an answer.
    const started = await h.entries('run.started');
    expect(started.map((e) => ({ attempt: e.attempt, token: e.token, owner: e.owner }))).toEqual([
      { attempt: 1, token: 1, owner: holder.owner },
      { attempt: 2, token: 2, owner: survivor.owner },
    ]);
    expect(fake.requests[0]!.aborted).toBe(true);
    expect(await recordedSends(h.ctx.redis, h.prefix)).toMatchObject([{ conversationId: CID, text: 'answer to what is the time?', owner: survivor.owner }]);

    // The conversation goes on with the survivor: the next message is answered once as well.
    asked.add('and now?');
    const second = await h.ingest('and now?');
    await h.runEnded((second as { runId: string }).runId, 15_000);
    expect((await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text)).toEqual(['answer to what is the time?', 'answer to and now?']);
  });
});

describe('a run whose job is delayed behind a live lease', () => {
  it('is not taken from a runner that is alive, however many stalled checks pass', async () => {
    const { fake, procs } = t;
    // One slow but healthy model call lasting several leases: the holder keeps its lease and its BullMQ lock.
    fake.script(() => ({ text: 'slow but sure', delayMs: LEASE_MS * 3 }));
    const h = (t.h = await RunnerHarness.start({ redisUrl: redisUrl() }));
    const settings = { redisUrl: redisUrl(), prefix: h.prefix, leaseMs: LEASE_MS, heartbeatMs: HEARTBEAT_MS, modelUrl: fake.url };
    procs.push(...(await Promise.all([startRunnerProcess(settings), startRunnerProcess(settings)])));

    const first = await h.ingest('take your time');
    const runId = (first as { runId: string }).runId;
    await h.runEnded(runId, LEASE_MS * 3 + 15_000);
    expect((await h.entries('run.started')).map((e) => e.attempt)).toEqual([1]);
    expect(fake.requests).toHaveLength(1);
    await waitFor(async () => (await recordedSends(h!.ctx.redis, h!.prefix)).length > 0 || undefined, 5000, 'reply recorded');
    expect((await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text)).toEqual(['slow but sure']);
  });
});
