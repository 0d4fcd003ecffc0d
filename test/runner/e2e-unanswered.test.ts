/**
 * End to end: a steered message that a run pulled and then failed or was
 * stopped before answering is named in the message the user gets and shown
 * by `/status` until a later run completes; never silently lost.
 */
import { describe, expect, it } from 'vitest';
import { runCommand } from '../../host/commands/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_MODEL_FAILURE_MESSAGE } from '../../plugins/local-agent/loop.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { CID, deferred, fakeModel, gatedTool, RunnerHarness as Harness, perTestModel, waitFor } from './harness.js';

const t = perTestModel();

/** The `/status` reply, as a user in the conversation gets it. */
async function status(h: RunnerHarness): Promise<string> {
  const r = await runCommand({ dispatch: h.dispatch, enqueue: async () => undefined }, { name: 'status', args: '' }, h.source(), undefined);
  return r.reply;
}

/** Starts the local agent with the gated `lookup` tool; ingests a question, waits for the tool, steers `steered` into the run, then lets the tool finish. */
async function steerDuringTool(steered: string): Promise<{ h: RunnerHarness; runId: string }> {
  const gate = gatedTool();
  const h = await Harness.start({
    plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [gate.tool], builtins: { currentTime: false }, maxRetries: 0 }),
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
  it('is named in the failure message when the model then fails, shown by /status, and cleared once a later run completes', async () => {
    t.fake.script((_req, index) =>
      index === 0
        ? { toolCalls: [{ name: 'lookup', args: {} }] }
        : index === 1
          ? { error: { status: 500, message: 'upstream exploded', type: 'server_error' } }
          : { text: 'All good now.' },
    );
    const { h, runId } = await steerDuringTool('also tell me the time');
    expect(await h.runEnded(runId)).toMatchObject({ outcome: 'failed', reason: 'model API error 500' });
    await h.idle();
    // The run pulled it: the failed request carried it.
    expect(userTexts(1)).toEqual(['look something up', 'also tell me the time']);
    expect(h.outbound.texts).toEqual([
      `${DEFAULT_MODEL_FAILURE_MESSAGE}\n\nThe run failed before answering this message: “also tell me the time”. Please send again what still needs an answer.`,
    ]);
    expect(await status(h)).toContain('Not answered (the run failed): “also tell me the time”');

    const next = await h.ingest('try again please');
    expect((await h.runEnded((next as { runId: string }).runId)).outcome).toBe('completed');
    await h.idle();
    expect(h.outbound.texts.at(-1)).toBe('All good now.');
    expect(await status(h)).not.toContain('Not answered');
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
    expect(await status(h)).toContain('Not answered (the run was stopped): “and the weather too”');
  });

  it('adds nothing when the run answered everything it pulled', async () => {
    t.fake.script((_req, index) => (index === 0 ? { toolCalls: [{ name: 'lookup', args: {} }] } : { text: 'Both answered.' }));
    const { h, runId } = await steerDuringTool('and this');
    expect((await h.runEnded(runId)).outcome).toBe('completed');
    await h.idle();
    expect(h.outbound.texts).toEqual(['Both answered.']);
    expect(await status(h)).not.toContain('Not answered');
  });

  it('is named when an attempt that took the run over fails, though the attempt that pulled it died', async () => {
    const pulled = deferred();
    const steered = deferred();
    // Attempt 1 pulls the steered message and hangs until its runner goes away; attempt 2 fails.
    const plugin: RunnerPlugin = {
      manifest: { name: 'pull-then-die', version: '1.0.0', capabilities: { steering: true } },
      async run(ctx) {
        if (ctx.attempt === 1) {
          await steered.promise;
          expect((await ctx.steering.pull()).map((m) => m.text)).toEqual(['while you are at it']);
          pulled.resolve();
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          return { outcome: 'completed' };
        }
        return { outcome: 'failed', reason: 'probe failure', notice: 'It broke.' };
      },
    };
    const h = await Harness.start({ plugin });
    t.h = h;
    const runId = ((await h.ingest('a question')) as { runId: string }).runId;
    await waitForRunning(h);
    expect(await h.ingest('while you are at it')).toMatchObject({ kind: 'steered', runId });
    steered.resolve();
    await pulled.promise;
    await h.runners[0]!.close(0);
    await h.startRunner(plugin);

    expect(await h.runEnded(runId)).toMatchObject({ outcome: 'failed', reason: 'probe failure' });
    await h.idle();
    expect((await h.entries('run.started')).map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.outbound.texts).toEqual([
      'It broke.\n\nThe run failed before answering this message: “while you are at it”. Please send again what still needs an answer.',
    ]);
    expect(await status(h)).toContain('Not answered (the run failed): “while you are at it”');
  });
});

/** Waits until the conversation's run is running (its first attempt acquired it). */
async function waitForRunning(h: RunnerHarness): Promise<void> {
  await waitFor(async () => ((await h.dispatch.status(CID)).runState === 'running' ? true : undefined), 10_000, 'run running');
}
