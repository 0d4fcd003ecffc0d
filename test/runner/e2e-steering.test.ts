/**
 * End to end: host ingest → Redis → BullMQ → runner → local agent (real
 * `@ai-sdk/openai-compatible` provider against the fake OpenAI server) →
 * delivery. Replies, steering during a tool, follow-up after the last step.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { deferred, FetchTap, fakeModel, onStreamingChannel, perTestModel, RunnerHarness } from './harness.js';

const t = perTestModel();

/** Chat messages of the `i`-th model request, system prompt left out. */
const chat = (i: number): Array<{ role: string; content: unknown; tool_call_id?: string }> =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role !== 'system');
const userTexts = (i: number) =>
  chat(i)
    .filter((m) => m.role === 'user')
    .map((m) => m.content);

describe('runner end to end', () => {
  it('answers a message and ends the run completed', async () => {
    t.fake.script([{ text: 'Hello Ann!' }]);
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url) }) });

    const r = await t.h.ingest('hi there');
    expect(r.kind).toBe('new-run');
    const runId = (r as { runId: string }).runId;
    await t.h.outbound.waitForMessages(1);
    const ended = await t.h.runEnded(runId);

    expect(t.h.outbound.sent).toEqual([{ conversationId: 'telegram:42', text: 'Hello Ann!' }]);
    expect(ended.outcome).toBe('completed');
    expect(userTexts(0)).toEqual(['hi there']);
    const steps = await t.h.entries('model.step');
    expect(steps.map((s) => s.run)).toEqual([runId]);
  });

  it('steers a message that arrives during a tool into the next request, after the tool result, without cutting the tool short', async () => {
    const toolStarted = deferred();
    const toolGate = deferred<string>();
    let toolSignal: AbortSignal | undefined;
    const slow: AgentTool = {
      name: 'slow',
      description: 'a slow lookup',
      inputSchema: z.object({}),
      async execute(_input, { signal }) {
        toolSignal = signal;
        toolStarted.resolve();
        return { value: await toolGate.promise };
      },
    };
    t.fake.script([{ toolCalls: [{ id: 'call_slow', name: 'slow', args: {} }] }, { text: 'Done, and noted your second message.' }]);
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [slow], builtins: { currentTime: false } }) });

    const first = await t.h.ingest('look something up');
    await toolStarted.promise;
    const second = await t.h.ingest('also check the weekend');
    expect(second).toMatchObject({ kind: 'steered', runId: (first as { runId: string }).runId });
    toolGate.resolve('FULL-RESULT-123');

    await t.h.outbound.waitForMessages(1);
    const ended = await t.h.runEnded((first as { runId: string }).runId);
    expect(ended.outcome).toBe('completed');

    expect(t.fake.requests).toHaveLength(2);
    const next = chat(1);
    expect(next.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(next[2]).toMatchObject({ tool_call_id: 'call_slow' });
    expect(JSON.parse(next[2]!.content as string)).toEqual({ value: 'FULL-RESULT-123' });
    expect(next[3]!.content).toBe('also check the weekend');
    expect(toolSignal?.aborted).toBe(false);

    expect(await t.h.entries('run.started')).toHaveLength(1);
    const injected = await t.h.entries('steering.injected');
    expect(injected).toMatchObject([{ seqs: [second.seq] }]);
    expect(injected[0]!.follow_up).toBeUndefined();
    expect(t.h.outbound.texts).toEqual(['Done, and noted your second message.']);
  });

  it('answers a message that arrives after the last step but before finish in the same run (follow-up)', async () => {
    const tap = new FetchTap();
    t.fake.script([{ text: 'Answer to the first.' }, { text: 'Answer to the second.' }]);
    t.h = await RunnerHarness.start({ plugin: onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(t.fake.url, tap), streaming: true })) });
    // The final (only) step of the first message stays open until the second message is in.
    const release = tap.hold(0);

    const first = await t.h.ingest('first question');
    const runId = (first as { runId: string }).runId;
    await t.fake.waitForRequests(1);
    const second = await t.h.ingest('second question');
    expect(second).toMatchObject({ kind: 'steered', runId });
    release();

    await t.h.outbound.waitForMessages(2);
    const ended = await t.h.runEnded(runId);
    expect(ended.outcome).toBe('completed');

    expect(t.h.outbound.texts).toEqual(['Answer to the first.', 'Answer to the second.']);
    expect(t.fake.requests).toHaveLength(2);
    expect(userTexts(0)).toEqual(['first question']);
    expect(chat(1).map((m) => [m.role, m.content])).toEqual([
      ['user', 'first question'],
      ['assistant', 'Answer to the first.'],
      ['user', 'second question'],
    ]);
    const started = await t.h.entries('run.started');
    expect(started.map((e) => e.run)).toEqual([runId]);
    expect(await t.h.entries('steering.injected')).toMatchObject([{ run: runId, seqs: [second.seq], follow_up: true }]);
    // Nothing else arrives: exactly one reply per message.
    await t.h.idle();
    expect(t.h.outbound.sent).toHaveLength(2);
    expect(await t.h.dispatch.status('telegram:42')).toMatchObject({ pendingDepth: 0, steeringDepth: 0 });
  });
});
