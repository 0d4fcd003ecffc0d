/**
 * A person's prompts make the model fail or fall silent after the provider
 * got them (a stream cut off mid-answer, a model that stops talking), so
 * the run fails over: no failed call reports usage, though the provider
 * bills each prompt it got. Each must still be charged to the budget; a
 * request that never reached a provider (connection refused) is not.
 * End to end through the real OpenAI-compatible provider against fake servers.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { conversationUsageKey } from '../../src/people/budget.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { tokensCharged } from '../helpers/usage.js';
import { CID, fakeModel, onStreamingChannel, RunnerHarness } from '../runner/harness.js';

const LONG_PROMPT = 'write me a long story about '.repeat(200);
/** What the answering fallback reports for each request. */
const REPORTED = { prompt_tokens: 1000, completion_tokens: 10 };

let primary: FakeOpenAIServer;
let fallback: FakeOpenAIServer;
let h: RunnerHarness | undefined;

/** A URL nothing listens on: a request to it is refused before anything is sent. */
async function refusingUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/v1`;
}

beforeEach(async () => {
  primary = await startFakeOpenAI();
  fallback = await startFakeOpenAI();
  fallback.script(() => ({ text: 'Answered by the fallback.', usage: REPORTED }));
  h = await RunnerHarness.start();
  // The budgets feature reads its settings when the runner starts.
  Object.assign(h.ctx.config, { budgets: { conversation: { tokensPerDay: 1_000_000 } } });
  const plugin = createLocalAgentPlugin({
    // The run's own model is down (connection refused); it fails over to `primary`, then to `fallback`.
    model: fakeModel(await refusingUrl()),
    fallbackModels: [fakeModel(primary.url), fakeModel(fallback.url)],
    builtins: { currentTime: false },
    maxRetries: 0,
    streamIdleTimeoutMs: 300,
    streaming: true,
  });
  await h.startRunner(onStreamingChannel(plugin));
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await Promise.all([primary.close(), fallback.close()]);
});

const charged = async () => tokensCharged(h!.redis, conversationUsageKey(h!.prefix, CID));

async function ask(text: string) {
  const r = (await h!.ingest(text)) as { runId: string };
  expect(await h!.runEnded(r.runId)).toMatchObject({ outcome: 'completed' });
}

describe('a model call that fails after the provider got its prompt', () => {
  it('is charged its prompt before the run fails over; a refused connection is charged nothing', async () => {
    // First run: refused, then `primary` answers (reporting usage): only that is charged.
    primary.script([{ text: 'First answer.', usage: REPORTED }]);
    await ask(LONG_PROMPT);
    expect(await charged()).toBe(1010);

    // Second run: refused, then `primary` says a little and falls silent, then `fallback` answers.
    primary.script([{ text: 'half an answer that', stallAfterChunks: 3 }]);
    await ask(LONG_PROMPT);
    expect(primary.requests.map((r) => r.aborted === true)).toEqual([false, true]);
    expect(fallback.requests).toHaveLength(1);
    // The silent call's prompt (some 2 000 tokens with the first turn) is charged besides the fallback's report.
    expect((await charged()) - 1010).toBeGreaterThan(1010 + 1500);
  });
});
