/**
 * Graceful shutdown of a runner: `close(graceMs)` stops taking runs, lets
 * active runs finish within the grace period, then aborts the rest without
 * finishing them. An aborted run stays `running` in Redis under its old
 * owner and is taken over by another runner once its lease expires.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { IngestResult } from '../../src/protocol/types.js';
import { CID, FetchTap, fakeModel, onStreamingChannel, perTestModel, RunnerHarness, waitFor } from './harness.js';

const t = perTestModel();

const runIdOf = (r: IngestResult): string => {
  expect(r.kind, JSON.stringify(r)).toBe('new-run');
  return (r as Extract<IngestResult, { kind: 'new-run' }>).runId;
};

describe('runner shutdown', () => {
  it('aborts a run still working when the grace period ends, leaves it running in Redis, and a second runner completes it after the lease', async () => {
    // Attempt 1's model call hangs until its client goes away; attempt 2 is answered.
    t.fake.script((_req, index) => (index === 0 ? { text: 'never sent', delayMs: 60_000 } : { text: 'Answered after the restart.' }));
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), maxRetries: 0 }) });
    const first = t.h.runners[0]!;

    const runId = runIdOf(await t.h.ingest('a question before shutdown'));
    await t.fake.waitForRequests(1);
    expect(await t.h.dispatch.status(CID)).toMatchObject({ activeRunId: runId, runState: 'running', attempt: 1, owner: first.owner });

    expect(await first.close(100)).toEqual({ abortedInFlight: 1 });

    // Not finished: still running under the old owner, nothing ended, nothing sent, nothing half-recorded.
    const left = await t.h.dispatch.status(CID);
    expect(left).toMatchObject({ activeRunId: runId, runState: 'running', attempt: 1, owner: first.owner, pendingDepth: 0 });
    expect(await t.h.entries('run.ended')).toEqual([]);
    expect(await t.h.entries('model.step')).toEqual([]);
    expect(t.h.outbound.sent).toEqual([]);
    await waitFor(() => t.fake.requests[0]!.aborted === true, 5000, 'the hanging model request aborted');

    const second = await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), maxRetries: 0 }));
    expect((await t.h.runEnded(runId, 20_000)).outcome).toBe('completed');
    await t.h.idle();

    const started = await t.h.entries('run.started');
    expect(started.map((e) => ({ run: e.run, attempt: e.attempt, token: e.token, owner: e.owner }))).toEqual([
      { run: runId, attempt: 1, token: 1, owner: first.owner },
      { run: runId, attempt: 2, token: 2, owner: second.owner },
    ]);
    // Taken over only once the old lease had run out (both times on the Redis clock).
    expect(started[1]!.at).toBeGreaterThanOrEqual(left.leaseUntilMs);
    expect(t.h.outbound.texts).toEqual(['Answered after the restart.']);
    expect(t.fake.requests).toHaveLength(2);
  });

  it('lets a run that finishes within the grace period complete, and takes no new run after closing', async () => {
    const tap = new FetchTap();
    t.fake.script([{ text: 'Finished during shutdown.' }, { text: 'Answered by the next runner.' }]);
    t.h = await RunnerHarness.start({
      plugin: onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(t.fake.url, tap), maxRetries: 0, streaming: true })),
    });
    const first = t.h.runners[0]!;
    const release = tap.hold(0); // the model's answer waits until shutdown has begun

    const runId = runIdOf(await t.h.ingest('a question answered while shutting down'));
    await t.fake.waitForRequests(1);
    const closing = first.close(20_000);
    release();

    expect(await closing).toEqual({ abortedInFlight: 0 });
    // close() resolved only after the run ended.
    expect((await t.h.entries('run.ended')).map((e) => ({ run: e.run, outcome: e.outcome }))).toEqual([{ run: runId, outcome: 'completed' }]);
    expect(t.h.outbound.texts).toEqual(['Finished during shutdown.']);

    // The closed runner takes nothing more: the next run waits for another runner.
    const next = runIdOf(await t.h.ingest('a question after shutdown'));
    expect(await t.h.dispatch.status(CID)).toMatchObject({ activeRunId: next, runState: 'queued' });
    const second = await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), maxRetries: 0 }));
    expect((await t.h.runEnded(next)).outcome).toBe('completed');
    const started = (await t.h.entries('run.started')).find((e) => e.run === next);
    expect(started).toMatchObject({ attempt: 1, owner: second.owner });
    expect(t.h.outbound.texts).toEqual(['Finished during shutdown.', 'Answered by the next runner.']);
  });
});
