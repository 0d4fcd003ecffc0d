/**
 * End to end: stop requests land mid-stream. `interrupt` keeps the partial
 * answer (marked cut off) in the successor's prompt, `supersede` leaves it
 * out of the prompt (kept in the record), `/stop` ends the run with no
 * successor. The model streams slowly so the abort reaches the HTTP request.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_CUT_OFF_MARKER } from '../../runner/projection.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { FetchTap, fakeModel, onStreamingChannel, RunnerHarness, waitFor } from './harness.js';

let fake: FakeOpenAIServer;
let tap: FetchTap;
let h: RunnerHarness | undefined;

const SLOW_ANSWER = 'PARTIAL-ALPHA PARTIAL-BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa';

beforeEach(async () => {
  fake = await startFakeOpenAI();
  tap = new FetchTap();
  // First request streams slowly (cut off by the test); later ones answer at once.
  fake.script((_req, index) => (index === 0 ? { text: SLOW_ANSWER, chunkDelayMs: 150 } : { text: 'Fresh answer.' }));
  h = await RunnerHarness.start({ plugin: onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(fake.url, tap), streaming: true })) });
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fake.close();
});

/** Starts a run and waits until part of its answer has streamed to the client; returns the run id. */
async function runStreaming(harness: RunnerHarness): Promise<string> {
  const first = await harness.ingest('write me a long story');
  expect(first.kind).toBe('new-run');
  await tap.waitForText('PARTIAL-BRAVO');
  return (first as { runId: string }).runId;
}

const aborted = () => waitFor(() => fake.requests[0]!.aborted === true, 5000, 'first model request aborted');
const chatOf = (i: number): Array<{ role: string; content: unknown }> => fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role !== 'system');

describe('stop requests mid-stream', () => {
  it('interrupt: aborts the model call, keeps the partial answer marked cut off, and runs the new message next', async () => {
    const runId = await runStreaming(h!);
    const second = await h!.ingest('stop, make it short', { policy: 'interrupt' });
    expect(second).toMatchObject({ kind: 'interrupting', runId, stop: 'interrupt' });

    await aborted();
    expect((await h!.runEnded(runId)).outcome).toBe('interrupted');
    await h!.outbound.waitForMessages(1);
    expect(h!.outbound.texts).toEqual(['Fresh answer.']);

    const started = await h!.entries('run.started');
    expect(started).toHaveLength(2);
    const successor = started[1]!;
    expect(successor.run).not.toBe(runId);
    expect(successor.inputs).toEqual([second.seq]);
    const partial = (await h!.entries('model.step')).find((s) => s.run === runId);
    expect(partial?.partial).toBe(true);

    const prompt = chatOf(1);
    expect(prompt.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    const kept = prompt[1]!.content as string;
    expect(kept).toContain('PARTIAL-ALPHA PARTIAL-BRAVO');
    expect(kept.endsWith(DEFAULT_CUT_OFF_MARKER)).toBe(true);
    expect(kept).not.toContain('papa'); // only what streamed before the abort
    expect(prompt[2]!.content).toBe('stop, make it short');
  });

  it('supersede: aborts the model call and leaves the partial answer out of the successor prompt (kept in the record)', async () => {
    const runId = await runStreaming(h!);
    const second = await h!.ingest('never mind, new question', { policy: 'supersede' });
    expect(second).toMatchObject({ kind: 'interrupting', runId, stop: 'supersede' });

    await aborted();
    expect((await h!.runEnded(runId)).outcome).toBe('superseded');
    await h!.outbound.waitForMessages(1);

    const partial = (await h!.entries('model.step')).find((s) => s.run === runId);
    expect(partial).toMatchObject({ partial: true });
    expect(JSON.stringify(partial!.messages)).toContain('PARTIAL-ALPHA');

    const prompt = chatOf(1);
    expect(JSON.stringify(prompt)).not.toContain('PARTIAL-ALPHA');
    expect(JSON.stringify(prompt)).not.toContain(DEFAULT_CUT_OFF_MARKER);
    expect(prompt.map((m) => [m.role, m.content])).toEqual([
      ['user', 'write me a long story'],
      ['user', 'never mind, new question'],
    ]);
    expect(h!.outbound.texts).toEqual(['Fresh answer.']);
  });

  it('/stop with no new input aborts the model call and ends the run stopped, with no successor', async () => {
    const runId = await runStreaming(h!);
    const stop = await h!.dispatch.requestStop(h!.source(), 'stop');
    expect(stop).toMatchObject({ kind: 'requested', runId, stop: 'stop' });

    await aborted();
    expect((await h!.runEnded(runId)).outcome).toBe('stopped');
    await h!.idle();
    expect(await h!.entries('run.started')).toHaveLength(1);
    expect(fake.requests).toHaveLength(1);
    expect(h!.outbound.sent).toEqual([]);

    // The conversation goes on: the next message gets a new run that sees the stopped answer marked.
    const next = await h!.ingest('ok, something else');
    expect(next.kind).toBe('new-run');
    await h!.outbound.waitForMessages(1);
    const kept = chatOf(1).find((m) => m.role === 'assistant')!.content as string;
    expect(kept).toContain('PARTIAL-ALPHA');
    expect(kept.endsWith(DEFAULT_CUT_OFF_MARKER)).toBe(true);
  });
});
