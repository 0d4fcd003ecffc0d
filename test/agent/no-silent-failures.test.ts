/**
 * No silent failures, end to end through the real OpenAI-compatible provider
 * against the fake server: a silent stream is aborted, retried once, then
 * reported; an empty answer gets a fallback message; a prompt that cannot fit
 * the context window ends `context_overflow` without calling the provider, and
 * so does one the provider refuses again after the one compaction.
 */
import type { ModelMessage } from 'ai';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { runAgentLoop } from '../../plugins/local-agent/loop.js';
import { CONTEXT_OVERFLOW_MESSAGE, EMPTY_ANSWER_MESSAGE, RUN_REASON, STREAM_TIMEOUT_MESSAGE } from '../../plugins/local-agent/outcomes.js';
import { ESTIMATE_MAX_OVERCOUNT, estimateMessages } from '../../runner/compaction/estimate.js';
import type { RunContext, StepRecord } from '../../runner/plugin.js';
import { askAndSettle, fakeModel, onStreamingChannel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

/** The local agent against this test's fake, with a short idle timeout; `followUpsOnFailure` as `runs.followUpsOnFailure`. */
async function start(opts: { tools?: AgentTool[]; streaming?: boolean; followUpsOnFailure?: number } = {}): Promise<RunnerHarness> {
  const plugin = createLocalAgentPlugin({
    model: fakeModel(t.fake.url),
    builtins: { currentTime: false },
    maxRetries: 0,
    streamIdleTimeoutMs: 300,
    ...(opts.tools && { tools: opts.tools }),
    ...(opts.streaming !== undefined && { streaming: opts.streaming }),
  });
  // A streaming agent runs on a channel that streams (the harness's own does not).
  t.h = await RunnerHarness.start({
    plugin: opts.streaming ? onStreamingChannel(plugin) : plugin,
    ...(opts.followUpsOnFailure !== undefined && { followUpsOnFailure: opts.followUpsOnFailure }),
  });
  return t.h;
}

describe('a silent model stream', () => {
  it('is aborted, retried once, and then the user is told and the run fails with reason timeout', async () => {
    t.fake.script(() => ({ text: 'never sent', delayMs: 60_000 }));
    // One run: no follow-up run asks the model again.
    const h = await start({ followUpsOnFailure: 0 });

    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'failed', reason: RUN_REASON.timeout });
    expect(t.fake.requests).toHaveLength(2);
    expect(t.fake.requests.every((r) => r.aborted)).toBe(true);
    expect(h.outbound.texts).toEqual([
      `${STREAM_TIMEOUT_MESSAGE}\n\nThe run failed before answering this message: “hello?”. Please send again what still needs an answer.`,
    ]);
  });

  it('asked whole (nothing is streamed) gets the idle budget for the whole call: aborted, retried once, then reported', async () => {
    t.fake.script(() => ({ text: 'never sent', delayMs: 60_000 }));
    const h = await start({ streaming: false, followUpsOnFailure: 0 });

    expect(await askAndSettle(h, 'hello?')).toMatchObject({ outcome: 'failed', reason: RUN_REASON.timeout });
    expect(t.fake.requests.map((r) => [r.body.stream === true, r.aborted === true])).toEqual([
      [false, true],
      [false, true],
    ]);
    expect(h.outbound.texts).toEqual([
      `${STREAM_TIMEOUT_MESSAGE}\n\nThe run failed before answering this message: “hello?”. Please send again what still needs an answer.`,
    ]);
  });

  it('that stalls mid-answer is retried, and the retry’s answer is what the user gets', async () => {
    t.fake.script([{ text: 'a half finished thought that', stallAfterChunks: 3 }, { text: 'The whole answer.' }]);
    const h = await start({ streaming: true });

    expect(await askAndSettle(h, 'explain')).toMatchObject({ outcome: 'completed' });
    expect(t.fake.requests.map((r) => r.aborted === true)).toEqual([true, false]);
    expect(h.outbound.texts).toEqual(['The whole answer.']);
    // The retry sent the same prompt: nothing of the stalled attempt reached the record.
    expect(t.fake.requests[1]!.body.messages).toEqual(t.fake.requests[0]!.body.messages);
    expect((await h.entries('model.step')).map((s) => s.finishReason)).toEqual(['stop']);
  });

  it('does not count a tool that takes longer than the timeout as silence', async () => {
    const slow: AgentTool = {
      name: 'slow',
      description: 'takes a while',
      inputSchema: z.object({}),
      // Three idle periods: the watchdog would have fired twice over if it counted tool time.
      execute: () => new Promise((resolve) => setTimeout(() => resolve({ value: 7 }), 900)),
    };
    t.fake.script([{ toolCalls: [{ name: 'slow', args: {} }] }, { text: 'It is 7.' }]);
    const h = await start({ tools: [slow] });

    expect(await askAndSettle(h, 'compute')).toMatchObject({ outcome: 'completed' });
    expect(t.fake.requests.map((r) => r.aborted === true)).toEqual([false, false]);
    expect(h.outbound.texts).toEqual(['It is 7.']);
  });
});

describe('an empty answer', () => {
  it('gets a short fallback message, and the run records why', async () => {
    t.fake.script([{ text: '' }]);
    const h = await start();

    const ended = await askAndSettle(h, 'say nothing');
    expect(ended.outcome).toBe('completed');
    expect(ended.reason).toBe(`${RUN_REASON.emptyAnswer} (finish: stop)`);
    expect(h.outbound.texts).toEqual([EMPTY_ANSWER_MESSAGE]);
  });
});

/** A hand-made RunContext (no Redis) for `runAgentLoop` with a small context window. */
function overflowContext(history: ModelMessage[], onOverflow: () => Promise<ModelMessage[] | undefined>) {
  const steps: StepRecord[] = [];
  const delivered: string[] = [];
  let overflowCalls = 0;
  const ctx: RunContext = {
    run: { id: 'run-overflow', conversationId: 'telegram:1', attempt: 1 },
    history,
    inputs: [],
    steering: { pull: async () => [] },
    state: { get: async () => undefined, set: async () => undefined },
    compaction: {
      atBoundary: async () => undefined,
      onOverflow: () => {
        overflowCalls++;
        return onOverflow();
      },
      observe: () => undefined,
    },
    record: { step: async (step) => steps.push(step) },
    delivery: { message: async (text) => void delivered.push(text), delta: () => undefined, typing: () => undefined },
    stop: { signal: new AbortController().signal, requested: () => undefined },
    logger: pino({ level: 'silent' }),
    agent: { model: { provider: 'openai-compatible', name: 'm', contextWindow: 2000, outputReserve: 500 } },
    features: {},
  };
  return { ctx, steps, delivered, overflowCalls: () => overflowCalls };
}

describe('a prompt larger than the context window', () => {
  const huge: ModelMessage = { role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(1500) };

  it('ends with a typed context_overflow outcome without calling the provider when compaction cannot help', async () => {
    const { ctx, overflowCalls } = overflowContext([huge], async () => undefined);

    const result = await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 });

    expect(result).toEqual({ outcome: 'failed', reason: RUN_REASON.contextOverflow, notice: CONTEXT_OVERFLOW_MESSAGE, final: true });
    expect(overflowCalls()).toBe(1);
    expect(t.fake.requests).toHaveLength(0);
  });

  it('sends a prompt whose (high-leaning) estimate is only a little over the window to the provider, without compacting', async () => {
    const near: ModelMessage = { role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(480) };
    expect(estimateMessages([near])).toBeGreaterThan(2000);
    expect(estimateMessages([near])).toBeLessThan(2000 * ESTIMATE_MAX_OVERCOUNT);
    const { ctx, delivered, overflowCalls } = overflowContext([near], async () => undefined);
    t.fake.script([{ text: 'Read it.' }]);

    expect(await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 })).toEqual({ outcome: 'completed' });
    expect(t.fake.requests).toHaveLength(1);
    expect(overflowCalls()).toBe(0);
    expect(delivered).toEqual(['Read it.']);
  });

  it('compacts first and calls the provider with the compacted prompt when that fits', async () => {
    const { ctx, delivered } = overflowContext([huge], async () => [{ role: 'user', content: 'summary: a long text was pasted' }]);
    t.fake.script([{ text: 'Understood.' }]);

    const result = await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 });

    expect(result).toEqual({ outcome: 'completed' });
    expect(t.fake.requests).toHaveLength(1);
    expect(t.fake.requests[0]!.body.messages).toEqual([{ role: 'user', content: 'summary: a long text was pasted' }]);
    expect(delivered).toEqual(['Understood.']);
  });

  const refused = { error: { status: 400, message: "This model's maximum context length is 2000 tokens.", code: 'context_length_exceeded' } };

  it('ends context_overflow, not a bare 400, when the provider refuses the prompt again after the one compaction', async () => {
    const { ctx, delivered, overflowCalls } = overflowContext([{ role: 'user', content: 'hello' }], async () => [{ role: 'user', content: 'summary' }]);
    t.fake.script([refused, refused, { text: 'never reached' }]);

    const result = await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 });

    expect(result).toEqual({ outcome: 'failed', reason: RUN_REASON.contextOverflow, notice: CONTEXT_OVERFLOW_MESSAGE, final: true });
    expect(t.fake.requests).toHaveLength(2);
    expect(t.fake.requests[1]!.body.messages).toEqual([{ role: 'user', content: 'summary' }]);
    expect(overflowCalls()).toBe(1);
    // The runtime sends the notice; the loop itself delivered nothing.
    expect(delivered).toEqual([]);
  });

  it('ends context_overflow when the provider refuses the prompt and there is nothing to compact', async () => {
    const { ctx, overflowCalls } = overflowContext([{ role: 'user', content: 'hello' }], async () => undefined);
    t.fake.script([refused, { text: 'never reached' }]);

    expect(await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 })).toMatchObject({ reason: RUN_REASON.contextOverflow });
    expect(t.fake.requests).toHaveLength(1);
    expect(overflowCalls()).toBe(1);
  });

  it('ends context_overflow when the compacted prompt still does not fit', async () => {
    const { ctx } = overflowContext([huge], async () => [huge]);

    expect(await runAgentLoop(ctx, { model: fakeModel(t.fake.url), tools: {}, maxRetries: 0 })).toMatchObject({ reason: RUN_REASON.contextOverflow });
    expect(t.fake.requests).toHaveLength(0);
  });
});
