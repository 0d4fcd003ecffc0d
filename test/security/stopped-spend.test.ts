/**
 * A person stops every run mid-answer (`/stop`), or before its first word:
 * the provider reports usage only at the stream's end, which a stopped call
 * never reaches. The tokens the provider bills all the same must still be
 * charged to their budget.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { conversationUsageKey } from '../../src/people/budget.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { tokensCharged } from '../helpers/usage.js';
import { CID, FetchTap, fakeModel, onStreamingChannel, RunnerHarness, waitFor } from '../runner/harness.js';

const LONG_ANSWER = 'PARTIAL-ALPHA PARTIAL-BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa';
const LONG_PROMPT = 'write me a long story about '.repeat(200);

let fake: FakeOpenAIServer;
let tap: FetchTap;
let h: RunnerHarness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  tap = new FetchTap();
  fake.script(() => ({ text: LONG_ANSWER, chunkDelayMs: 150 }));
  h = await RunnerHarness.start();
  // The budgets feature reads its settings when the runner starts.
  Object.assign(h.ctx.config, { budgets: { conversation: { tokensPerDay: 1_000_000 } } });
  await h.startRunner(onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(fake.url, tap), streaming: true })));
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fake.close();
});

describe('a run stopped mid-answer', () => {
  it('is charged for its prompt and what was said before the stop, though the provider never reported usage', async () => {
    const first = await h!.ingest(LONG_PROMPT);
    expect(first.kind).toBe('new-run');
    const runId = (first as { runId: string }).runId;
    await tap.waitForText('PARTIAL-BRAVO');
    expect(await h!.dispatch.requestStop(h!.source(), 'stop')).toMatchObject({ kind: 'requested', runId });
    await waitFor(() => fake.requests[0]!.aborted === true, 5000, 'model request aborted');
    await h!.runEnded(runId);

    const charged = await tokensCharged(h!.redis, conversationUsageKey(h!.prefix, CID));
    // The prompt alone is some 1 000 tokens; a stop must not make it free.
    expect(charged).toBeGreaterThan(800);
  });
});

describe('a run stopped before the first word of its answer', () => {
  it('is charged for its prompt, though nothing was said and the provider never reported usage', async () => {
    // The provider has the request and is still thinking: nothing is said before the stop.
    fake.script(() => ({ text: LONG_ANSWER, delayMs: 30_000 }));
    const first = await h!.ingest(LONG_PROMPT);
    const runId = (first as { runId: string }).runId;
    await fake.waitForRequests(1);
    expect(await h!.dispatch.requestStop(h!.source(), 'stop')).toMatchObject({ kind: 'requested', runId });
    await waitFor(() => fake.requests[0]!.aborted === true, 5000, 'model request aborted');
    await h!.runEnded(runId);

    const charged = await tokensCharged(h!.redis, conversationUsageKey(h!.prefix, CID));
    expect(charged).toBeGreaterThan(800);
    // Nothing was said: no partial step is kept, only the charge.
    expect(await h!.entries('model.step')).toEqual([]);
  });
});
