/**
 * End to end: a message that arrives after `/stop` starts a new run. It is
 * not taken by the run that is stopping (that run pulls nothing more once a
 * stop was requested) and does not wait for anything but that run's end:
 * `finish` hands it to a successor run, which answers it.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { fakeModel, gatedTool, RunnerHarness as Harness, perTestModel, waitFor } from './harness.js';

const t = perTestModel();

const userTexts = (i: number): string[] =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content);

function agent(tools: ReturnType<typeof gatedTool>['tool'][] = []) {
  return createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools, builtins: { currentTime: false }, maxRetries: 0 });
}

/** Waits until `n` runs have started (first attempts); returns them in order. */
async function runsStarted(h: RunnerHarness, n: number): Promise<Array<{ run: string; inputs: number[] | undefined }>> {
  const started = async () => (await h.entries('run.started')).filter((e) => e.attempt === 1).map((e) => ({ run: e.run, inputs: e.inputs }));
  return waitFor(
    async () => {
      const runs = await started();
      return runs.length >= n && runs;
    },
    10_000,
    `${n} runs started`,
  );
}

describe('a message that arrives after /stop', () => {
  it('while the stopped run is still finishing its tool call: a new run answers it once the stopped run ends', async () => {
    const gate = gatedTool();
    t.fake.script((_req, index) => (index === 0 ? { toolCalls: [{ name: 'lookup', args: {} }] } : { text: `Answer ${index}.` }));
    const h = await Harness.start({ plugin: agent([gate.tool]) });
    t.h = h;
    const first = (await h.ingest('look something up')) as { runId: string; seq: number };
    await gate.started;
    expect(await h.dispatch.requestStop(h.source(), 'stop')).toMatchObject({ kind: 'requested', runId: first.runId, runState: 'running' });

    // It waits on the stopping run's steering list; that run pulls nothing more, its finish hands it on.
    const after = await h.ingest('something else, please');
    expect(after).toMatchObject({ kind: 'steered', runId: first.runId });
    gate.release('42');

    expect((await h.runEnded(first.runId)).outcome).toBe('stopped');
    expect((await h.entries('steering.injected')).filter((e) => e.seqs.includes(after.seq))).toEqual([]);
    expect((await h.entries('steering.requeued')).map((e) => [e.run, e.seqs])).toEqual([[first.runId, [after.seq]]]);
    const started = await runsStarted(h, 2);
    expect(started.map((s) => s.inputs)).toEqual([[first.seq], [after.seq]]);
    expect((await h.runEnded(started[1]!.run)).outcome).toBe('completed');
    await h.idle();
    // One request for the stopped run (its tool call), one for the new run, whose prompt ends with the new message.
    expect(t.fake.requests).toHaveLength(2);
    expect(userTexts(1)).toEqual(['look something up', 'something else, please']);
    expect(h.outbound.texts).toEqual(['Answer 1.']);
  });

  it('while the stopped run is still queued: the stopped run never starts and a new run answers the message', async () => {
    t.fake.script(() => ({ text: 'Fresh answer.' }));
    // No runner yet: the run stays queued.
    const h = await Harness.start();
    t.h = h;
    const first = (await h.ingest('first question')) as { runId: string; seq: number };
    expect(await h.dispatch.requestStop(h.source(), 'stop')).toMatchObject({ kind: 'requested', runId: first.runId, runState: 'queued' });
    const after = await h.ingest('second question');
    // A queued run that was told to stop takes no more input.
    expect(after.kind).not.toBe('joined');

    await h.startRunner(agent());
    expect((await h.runEnded(first.runId)).outcome).toBe('stopped');
    const started = await runsStarted(h, 2);
    expect(started.map((s) => s.inputs)).toEqual([[first.seq], [after.seq]]);
    expect((await h.runEnded(started[1]!.run)).outcome).toBe('completed');
    await h.idle();
    expect(t.fake.requests).toHaveLength(1);
    expect(userTexts(0)).toEqual(['first question', 'second question']);
    expect(h.outbound.texts).toEqual(['Fresh answer.']);
  });
});
