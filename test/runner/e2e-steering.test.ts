/**
 * End to end: host ingest → Redis → BullMQ → runner → local agent (real
 * `@ai-sdk/openai-compatible` provider against the fake OpenAI server) →
 * delivery. Replies, steering during a tool, follow-up after the last step.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLocalAgentPlugin, type AgentTool } from '../../plugins/local-agent/index.js';
import { startFakeOpenAI, type FakeOpenAIServer } from '../fakes/openai-server.js';
import { deferred, fakeModel, FetchTap, RunnerHarness } from './harness.js';

let fake: FakeOpenAIServer;
let h: RunnerHarness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fake.close();
});

/** Chat messages of the `i`-th model request, system prompt left out. */
const chat = (i: number): Array<{ role: string; content: unknown; tool_call_id?: string }> =>
  fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role !== 'system');
const userTexts = (i: number) => chat(i).filter((m) => m.role === 'user').map((m) => m.content);

describe('runner end to end', () => {
  it('answers a message and ends the run completed', async () => {
    fake.script([{ text: 'Hello Ann!' }]);
    h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(fake.url) }) });

    const r = await h.ingest('hi there');
    expect(r.kind).toBe('new-run');
    const runId = (r as { runId: string }).runId;
    await h.outbound.waitForMessages(1);
    const ended = await h.runEnded(runId);

    expect(h.outbound.sent).toEqual([{ conversationId: 'telegram:42', text: 'Hello Ann!' }]);
    expect(ended.outcome).toBe('completed');
    expect(userTexts(0)).toEqual(['hi there']);
    const steps = await h.entries('model.step');
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
    fake.script([{ toolCalls: [{ id: 'call_slow', name: 'slow', args: {} }] }, { text: 'Done, and noted your second message.' }]);
    h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), tools: [slow], builtins: { currentTime: false } }) });

    const first = await h.ingest('look something up');
    await toolStarted.promise;
    const second = await h.ingest('also check the weekend');
    expect(second).toMatchObject({ kind: 'steered', runId: (first as { runId: string }).runId });
    toolGate.resolve('FULL-RESULT-123');

    await h.outbound.waitForMessages(1);
    const ended = await h.runEnded((first as { runId: string }).runId);
    expect(ended.outcome).toBe('completed');

    expect(fake.requests).toHaveLength(2);
    const next = chat(1);
    expect(next.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(next[2]).toMatchObject({ tool_call_id: 'call_slow' });
    expect(JSON.parse(next[2]!.content as string)).toEqual({ value: 'FULL-RESULT-123' });
    expect(next[3]!.content).toBe('also check the weekend');
    expect(toolSignal?.aborted).toBe(false);

    expect(await h.entries('run.started')).toHaveLength(1);
    const injected = await h.entries('steering.injected');
    expect(injected).toMatchObject([{ seqs: [second.seq] }]);
    expect(injected[0]!.follow_up).toBeUndefined();
    expect(h.outbound.texts).toEqual(['Done, and noted your second message.']);
  });

  it('answers a message that arrives after the last step but before finish in the same run (follow-up)', async () => {
    const tap = new FetchTap();
    fake.script([{ text: 'Answer to the first.' }, { text: 'Answer to the second.' }]);
    h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(fake.url, tap) }) });
    // The final (only) step of the first message stays open until the second message is in.
    const release = tap.hold(0);

    const first = await h.ingest('first question');
    const runId = (first as { runId: string }).runId;
    await fake.waitForRequests(1);
    const second = await h.ingest('second question');
    expect(second).toMatchObject({ kind: 'steered', runId });
    release();

    await h.outbound.waitForMessages(2);
    const ended = await h.runEnded(runId);
    expect(ended.outcome).toBe('completed');

    expect(h.outbound.texts).toEqual(['Answer to the first.', 'Answer to the second.']);
    expect(fake.requests).toHaveLength(2);
    expect(userTexts(0)).toEqual(['first question']);
    expect(chat(1).map((m) => [m.role, m.content])).toEqual([
      ['user', 'first question'],
      ['assistant', 'Answer to the first.'],
      ['user', 'second question'],
    ]);
    const started = await h.entries('run.started');
    expect(started.map((e) => e.run)).toEqual([runId]);
    expect(await h.entries('steering.injected')).toMatchObject([{ run: runId, seqs: [second.seq], follow_up: true }]);
    // Nothing else arrives: exactly one reply per message.
    await h.idle();
    expect(h.outbound.sent).toHaveLength(2);
    expect(await h.dispatch.status('telegram:42')).toMatchObject({ pendingDepth: 0, steeringDepth: 0 });
  });
});
