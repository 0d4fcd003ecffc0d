/**
 * End to end: a steered message that a run pulled and then did not answer
 * — it failed, and its follow-ups failed too, or it was stopped — is named
 * in the one message the user gets and shown by `/status` until a later run
 * completes; never silently lost.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_MODEL_FAILURE_MESSAGE } from '../../plugins/local-agent/loop.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { CID, deferred, fakeModel, gatedTool, RunnerHarness as Harness, perTestModel, statusReply, waitFor } from './harness.js';

const t = perTestModel();

/**
 * Starts the local agent with the gated `lookup` tool; ingests a question, waits for the tool, steers `steered` into the run, then lets the tool finish.
 * `followUpsOnFailure`: the runner's `runs.followUpsOnFailure` (default: the configured default).
 */
async function steerDuringTool(steered: string, followUpsOnFailure?: number): Promise<{ h: RunnerHarness; runId: string }> {
  const gate = gatedTool();
  const h = await Harness.start({
    plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [gate.tool], builtins: { currentTime: false }, maxRetries: 0 }),
    ...(followUpsOnFailure !== undefined && { followUpsOnFailure }),
  });
  t.h = h;
  const first = await h.ingest('look something up');
  const runId = (first as { runId: string }).runId;
  await gate.started;
  expect(await h.ingest(steered)).toMatchObject({ kind: 'steered', runId });
  gate.release('42');
  return { h, runId };
}

const userTexts = (i: number): string[] =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content);

describe('a steered message the run pulled and did not answer', () => {
  it('is named, with the run’s own message, in the one message sent when the model keeps failing through the follow-ups; shown by /status and cleared once a later run completes', async () => {
    // The model fails every request after the tool call (three runs: the first and two follow-ups), then recovers.
    t.fake.script((_req, index) =>
      index === 0
        ? { toolCalls: [{ name: 'lookup', args: {} }] }
        : index <= 3
          ? { error: { status: 500, message: 'upstream exploded', type: 'server_error' } }
          : { text: 'All good now.' },
    );
    const { h, runId } = await steerDuringTool('also tell me the time');
    expect(await h.runEnded(runId)).toMatchObject({ outcome: 'failed', reason: 'model API error 500' });
    // No successor is created after the last failure: idle once three runs ended.
    await waitFor(async () => (await h.entries('run.ended')).length === 3, 10_000, 'three runs ended');
    await h.idle();
    const ended = await h.entries('run.ended');
    expect(ended.map((e) => [e.outcome, e.reason])).toEqual(Array(3).fill(['failed', 'model API error 500']));
    expect(new Set(ended.map((e) => e.run)).size).toBe(3);
    // The run pulled it: the failed request carried it, and so did each follow-up's.
    expect(t.fake.requests).toHaveLength(4);
    for (const i of [1, 2, 3]) expect(userTexts(i)).toEqual(['look something up', 'also tell me the time']);
    expect(h.outbound.texts).toEqual([
      `${DEFAULT_MODEL_FAILURE_MESSAGE}\n\nThe run failed 3 times in a row before answering these messages: “look something up”, “also tell me the time”. Please send again what still needs an answer.`,
    ]);
    expect(await statusReply(h)).toContain('Not answered (the run failed): “look something up”, “also tell me the time”');

    const next = await h.ingest('try again please');
    expect((await h.runEnded((next as { runId: string }).runId)).outcome).toBe('completed');
    await h.idle();
    expect(h.outbound.texts.at(-1)).toBe('All good now.');
    expect(await statusReply(h)).not.toContain('Not answered');
  });

  it('is named at the first failure when follow-ups are turned off (runs.followUpsOnFailure 0)', async () => {
    t.fake.script((_req, index) =>
      index === 0 ? { toolCalls: [{ name: 'lookup', args: {} }] } : { error: { status: 500, message: 'upstream exploded', type: 'server_error' } },
    );
    const { h, runId } = await steerDuringTool('also tell me the time', 0);
    expect(await h.runEnded(runId)).toMatchObject({ outcome: 'failed' });
    await h.idle();
    expect(await h.entries('run.started')).toHaveLength(1);
    expect(h.outbound.texts).toEqual([
      `${DEFAULT_MODEL_FAILURE_MESSAGE}\n\nThe run failed before answering these messages: “look something up”, “also tell me the time”. Please send again what still needs an answer.`,
    ]);
  });

  it('is named in a message when the user stops the run before it answered, and shown by /status', async () => {
    // The request after the pull hangs until the stop aborts it.
    t.fake.script((_req, index) => (index === 0 ? { toolCalls: [{ name: 'lookup', args: {} }] } : { text: 'never sent', delayMs: 60_000 }));
    const { h, runId } = await steerDuringTool('and the weather too');
    await t.fake.waitForRequests(2);
    expect(userTexts(1)).toEqual(['look something up', 'and the weather too']);
    expect(await h.dispatch.requestStop(h.source(), 'stop')).toMatchObject({ kind: 'requested' });

    expect((await h.runEnded(runId)).outcome).toBe('stopped');
    await h.idle();
    expect(h.outbound.texts).toEqual([
      'The run was stopped before answering this message: “and the weather too”. Please send again what still needs an answer.',
    ]);
    expect(await statusReply(h)).toContain('Not answered (the run was stopped): “and the weather too”');
  });

  it('adds nothing when the run answered everything it pulled', async () => {
    t.fake.script((_req, index) => (index === 0 ? { toolCalls: [{ name: 'lookup', args: {} }] } : { text: 'Both answered.' }));
    const { h, runId } = await steerDuringTool('and this');
    expect((await h.runEnded(runId)).outcome).toBe('completed');
    await h.idle();
    expect(h.outbound.texts).toEqual(['Both answered.']);
    expect(await statusReply(h)).not.toContain('Not answered');
  });

  it('is named when an attempt that took the run over fails and so do its follow-ups, though the attempt that pulled it died', async () => {
    const pulled = deferred();
    const steered = deferred();
    // Attempt 1 of the first run pulls the steered message and hangs until its runner goes away; every later invocation fails.
    const plugin: RunnerPlugin = {
      manifest: { name: 'pull-then-die', version: '1.0.0', capabilities: { steering: true } },
      async run(ctx) {
        if (ctx.run.attempt === 1 && ctx.run.id === runId) {
          await steered.promise;
          expect((await ctx.steering.pull()).map((m) => m.text)).toEqual(['while you are at it']);
          pulled.resolve();
          await new Promise((resolve) => ctx.stop.signal.addEventListener('abort', resolve));
          return { outcome: 'completed' };
        }
        return { outcome: 'failed', reason: 'probe failure', notice: 'It broke.' };
      },
    };
    const h = await Harness.start();
    t.h = h;
    const runId = ((await h.ingest('a question')) as { runId: string }).runId;
    await h.startRunner(plugin);
    await waitForRunning(h);
    expect(await h.ingest('while you are at it')).toMatchObject({ kind: 'steered', runId });
    steered.resolve();
    await pulled.promise;
    await h.runners[0]!.close(0);
    await h.startRunner(plugin);

    expect(await h.runEnded(runId)).toMatchObject({ outcome: 'failed', reason: 'probe failure' });
    await waitFor(async () => (await h.entries('run.ended')).length === 3, 10_000, 'three runs ended');
    await h.idle();
    expect((await h.entries('run.started')).map((e) => [e.run === runId, e.attempt])).toEqual([
      [true, 1],
      [true, 2],
      [false, 1],
      [false, 1],
    ]);
    expect(h.outbound.texts).toEqual([
      'It broke.\n\nThe run failed 3 times in a row before answering these messages: “a question”, “while you are at it”. Please send again what still needs an answer.',
    ]);
    expect(await statusReply(h)).toContain('Not answered (the run failed): “a question”, “while you are at it”');
  });
});

/** Waits until the conversation's run is running (its first attempt acquired it). */
async function waitForRunning(h: RunnerHarness): Promise<void> {
  await waitFor(async () => ((await h.dispatch.status(CID)).runState === 'running' ? true : undefined), 10_000, 'run running');
}
