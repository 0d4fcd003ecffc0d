/**
 * End to end: a run that fails hands the messages it took and did not answer
 * — its own inputs, the steering it pulled — and the steering still waiting
 * to a follow-up run, which answers each of them once. The person hears
 * nothing of the failure. A takeover of the failing run or of the follow-up
 * does not answer anything twice.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_MODEL_FAILURE_MESSAGE } from '../../plugins/local-agent/loop.js';
import type { RunContext, RunnerPlugin } from '../../runner/plugin.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { CID, deferred, FetchTap, fakeModel, gatedTool, RunnerHarness as Harness, perTestModel, statusReply, waitFor } from './harness.js';

const t = perTestModel();

const userTexts = (i: number): string[] =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content);

/** Every `run.started` entry: run, attempt, inputs. */
async function starts(h: RunnerHarness): Promise<Array<{ run: string; attempt: number; inputs: number[] | undefined }>> {
  return (await h.entries('run.started')).map((e) => ({ run: e.run, attempt: e.attempt, inputs: e.inputs }));
}

/** Waits for the first attempt of the `n`-th run (1-based) the conversation started; returns its id. */
async function nthRun(h: RunnerHarness, n: number): Promise<string> {
  return waitFor(async () => (await starts(h)).filter((s) => s.attempt === 1)[n - 1]?.run, 10_000, `run ${n} started`);
}

const failuresOf = async (h: RunnerHarness, runId: string) => h.redis.hget(conversationKeys(h.prefix, CID).run(runId), 'failures');

/** Records `text` as the invocation's final answer and delivers it, as an agent loop does. */
async function answer(ctx: RunContext, text: string): Promise<void> {
  await ctx.record.step({ messages: [{ role: 'assistant', content: [{ type: 'text', text }] }], finishReason: 'stop' });
  await ctx.delivery.message(text);
}

describe('a run that fails with messages it did not answer', () => {
  it('hands them, and the steering still waiting, to a follow-up run that answers each once; the person sees only the answer', async () => {
    const gate = gatedTool();
    const tap = new FetchTap();
    // The failing request's answer is held until a second steered message is waiting, unpulled.
    const releaseFailure = tap.hold(1);
    t.fake.script((_req, index) =>
      index === 0
        ? { toolCalls: [{ name: 'lookup', args: {} }] }
        : index === 1
          ? { error: { status: 500, message: 'upstream exploded', type: 'server_error' } }
          : { text: 'Answered all three.' },
    );
    const h = await Harness.start({
      plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url, tap), tools: [gate.tool], builtins: { currentTime: false }, maxRetries: 0 }),
    });
    t.h = h;
    const first = (await h.ingest('look something up')) as { runId: string; seq: number };
    await gate.started;
    const pulled = await h.ingest('also tell me the time');
    expect(pulled).toMatchObject({ kind: 'steered', runId: first.runId });
    gate.release('42');
    await t.fake.waitForRequests(2);
    expect(userTexts(1)).toEqual(['look something up', 'also tell me the time']);
    const waiting = await h.ingest('and the weather');
    expect(waiting).toMatchObject({ kind: 'steered', runId: first.runId });
    releaseFailure();

    expect(await h.runEnded(first.runId)).toMatchObject({ outcome: 'failed', reason: 'model API error 500' });
    const followUp = await nthRun(h, 2);
    expect((await h.runEnded(followUp)).outcome).toBe('completed');
    await h.idle();

    // The follow-up took all three, oldest first, and counts one failure.
    expect((await starts(h)).find((s) => s.run === followUp)?.inputs).toEqual([first.seq, pulled.seq, waiting.seq]);
    expect(await failuresOf(h, followUp)).toBe('1');
    const requeued = (await h.entries('steering.requeued')).find((e) => e.run === first.runId);
    expect(requeued?.seqs).toEqual([first.seq, pulled.seq, waiting.seq]);
    // Its prompt holds each message once and the failed run's tool call with its result (the follow-up continues
    // from it: a tool with an effect is not called again), and it was answered once.
    expect(t.fake.requests).toHaveLength(3);
    expect(userTexts(2)).toEqual(['look something up', 'also tell me the time', 'and the weather']);
    const toolMessages = (t.fake.requests[2]!.body.messages as Array<{ role: string; content: unknown }>).filter((m) => m.role === 'tool');
    expect(toolMessages).toHaveLength(1);
    expect(JSON.stringify(toolMessages[0]!.content)).toContain('42');
    expect(h.outbound.texts).toEqual(['Answered all three.']);
    expect(await h.entries('run.started')).toHaveLength(2);
    expect(await statusReply(h)).not.toContain('Not answered');
  });

  it('when a follow-up would fail the same way (the provider refuses the request as invalid), tells the person at once, with no follow-up', async () => {
    t.fake.script(() => ({ error: { status: 400, message: 'Invalid value for temperature', type: 'invalid_request_error' } }));
    const h = await Harness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false }, maxRetries: 0 }) });
    t.h = h;
    const first = (await h.ingest('hello')) as { runId: string };
    expect(await h.runEnded(first.runId)).toMatchObject({ outcome: 'failed', reason: 'model API error 400' });
    await h.idle();
    expect(await h.entries('run.started')).toHaveLength(1);
    expect(t.fake.requests).toHaveLength(1);
    expect(h.outbound.texts).toEqual([
      `${DEFAULT_MODEL_FAILURE_MESSAGE}\n\nThe run failed before answering this message: “hello”. Please send again what still needs an answer.`,
    ]);
    expect(await statusReply(h)).toContain('Not answered (the run failed): “hello”');
  });

  it('when the run was taken over after its runner died and the new attempt fails, the follow-up answers what both attempts took, once', async () => {
    const steered = deferred();
    const pulled = deferred();
    let invocations = 0;
    // Invocation 1 (attempt 1) pulls the steered message and hangs until its runner goes away;
    // invocation 2 (attempt 2) fails; invocation 3 is the follow-up.
    const plugin: RunnerPlugin = {
      manifest: { name: 'die-fail-answer', version: '1.0.0', capabilities: { steering: true } },
      async run(ctx) {
        const n = ++invocations;
        if (n === 1) {
          await steered.promise;
          expect((await ctx.steering.pull()).map((m) => m.text)).toEqual(['while you are at it']);
          pulled.resolve();
          await new Promise((resolve) => ctx.stop.signal.addEventListener('abort', resolve));
          return { outcome: 'completed' };
        }
        if (n === 2) return { outcome: 'failed', reason: 'probe failure', notice: 'It broke.' };
        await answer(ctx, `Answered: ${ctx.inputs.map((m) => m.text).join(' + ')}`);
        return { outcome: 'completed' };
      },
    };
    const h = await Harness.start({ plugin });
    t.h = h;
    const first = (await h.ingest('a question')) as { runId: string; seq: number };
    await waitFor(async () => (await h.dispatch.status(CID)).runState === 'running', 10_000, 'run running');
    const late = await h.ingest('while you are at it');
    expect(late).toMatchObject({ kind: 'steered', runId: first.runId });
    steered.resolve();
    await pulled.promise;
    await h.runners[0]!.close(0);
    await h.startRunner(plugin);

    expect(await h.runEnded(first.runId)).toMatchObject({ outcome: 'failed', reason: 'probe failure' });
    const followUp = await nthRun(h, 2);
    expect((await h.runEnded(followUp)).outcome).toBe('completed');
    await h.idle();
    expect((await starts(h)).map((s) => [s.run === first.runId ? 'failed run' : 'follow-up', s.attempt, s.inputs])).toEqual([
      ['failed run', 1, [first.seq]],
      ['failed run', 2, [first.seq]],
      ['follow-up', 1, [first.seq, late.seq]],
    ]);
    expect(invocations).toBe(3);
    expect(h.outbound.texts).toEqual(['Answered: a question + while you are at it']);
  });

  it('when the follow-up is taken over after it delivered its answer, the answer is not sent again and no further run starts', async () => {
    const delivered = deferred();
    let invocations = 0;
    // Invocation 1 fails; invocation 2 (the follow-up) answers, then its runner dies before it finishes.
    const plugin: RunnerPlugin = {
      manifest: { name: 'fail-answer-die', version: '1.0.0', capabilities: { steering: true } },
      async run(ctx) {
        const n = ++invocations;
        if (n === 1) return { outcome: 'failed', reason: 'probe failure', notice: 'It broke.' };
        await answer(ctx, `Answered: ${ctx.inputs.map((m) => m.text).join(' + ')}`);
        delivered.resolve();
        await new Promise((resolve) => ctx.stop.signal.addEventListener('abort', resolve));
        return { outcome: 'completed' };
      },
    };
    const h = await Harness.start({ plugin });
    t.h = h;
    const first = (await h.ingest('a question')) as { runId: string; seq: number };
    await delivered.promise;
    const followUp = await nthRun(h, 2);
    await h.runners[0]!.close(0);
    await h.startRunner(plugin);

    expect((await h.runEnded(followUp)).outcome).toBe('completed');
    await h.idle();
    expect((await starts(h)).filter((s) => s.run === followUp).map((s) => [s.attempt, s.inputs])).toEqual([
      [1, [first.seq]],
      [2, [first.seq]],
    ]);
    // The takeover delivered the recorded answer without invoking the plugin; the outbox had it acknowledged.
    expect(invocations).toBe(2);
    expect(h.outbound.texts).toEqual(['Answered: a question']);
    expect(await failuresOf(h, followUp)).toBe('1');
    expect((await h.entries('run.ended')).map((e) => e.outcome)).toEqual(['failed', 'completed']);
  });
});
