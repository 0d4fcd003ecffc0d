/**
 * Compaction's model calls as an attacker spends them. A person whose token
 * budget is spent keeps sending long messages (each recorded as a refused
 * run's input), then `/compact` while the conversation is idle: a summarizer
 * call of up to 120 000 characters in and 6000 out, which no budget admitted
 * or charged, again on every `/compact`. And a compaction inside a normal run
 * (the window full before a step) spends the summarizer's tokens too. End to
 * end: the runtime (ingest → Redis → BullMQ → runner) with the budgets
 * feature, the local agent and the summarizer on the real OpenAI-compatible
 * provider against the fake model server.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import type { CoreConfig } from '../../src/config/load.js';
import { type BudgetSettings, identityUsageKey } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { type FakeOpenAIServer, type FakeRequest, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { tokensCharged } from '../helpers/usage.js';
import { CID, fakeModel, RunnerHarness } from '../runner/harness.js';

/** The summarizer's instructions start with this (runner/compaction/summarize.ts). */
const SUMMARIZER_MARK = 'You maintain the running summary';
const isSummarizer = (r: FakeRequest) => String(r.body.messages?.[0]?.content ?? '').startsWith(SUMMARIZER_MARK);
const LONG = 'Please remember every detail of the nightly import: the batch sizes, the dedupe step and the memory figures. '.repeat(20);
const SPENT = /^You have used up today's usage allowance\. It resets at /;

let model: FakeOpenAIServer;
let h: RunnerHarness;

beforeEach(async () => {
  model = await startFakeOpenAI();
  h = await RunnerHarness.start();
});
afterEach(async () => {
  await h.close();
  await model.close();
});

/** Starts a runner with the budgets feature on `budgets`, the agent and the summarizer on the fake model; `contextWindow`: usable + 48 tokens. */
async function start(budgets: BudgetSettings, contextWindow?: number): Promise<void> {
  const config: CoreConfig = {
    ...h.ctx.config,
    budgets,
    ...(contextWindow !== undefined && { model: { ...h.ctx.config.model, contextWindow, outputReserve: 48 } }),
  };
  const runner = await startRunner(
    { ...h.ctx, config },
    {
      plugin: createLocalAgentPlugin({ model: fakeModel(model.url), maxRetries: 0, builtins: { currentTime: false } }),
      resolveOutbound: (cid) => (cid.startsWith('telegram:') ? h.outbound : undefined),
      lockDurationMs: 2000,
      stalledIntervalMs: 500,
      compaction: { model: fakeModel(model.url) },
      features: runnerFeatures(),
    },
  );
  h.runners.push(runner);
}

/** The agent's and the summarizer's answers. */
function script(agent: FakeTurn, summarizer: FakeTurn): void {
  model.script((body) => (String(body.messages?.[0]?.content ?? '').startsWith(SUMMARIZER_MARK) ? summarizer : agent));
}

/** Tokens charged today to the harness's sender (u1 on Telegram). */
async function personCharged(): Promise<number> {
  const identity = await new IdentityStore({ redis: h.redis, prefix: h.prefix }).resolve('telegram', 'u1');
  return tokensCharged(h.redis, identityUsageKey(h.prefix, identity));
}

/** Ingests `text` as a run of its own; returns how it ended. */
async function say(text: string) {
  const r = await h.ingest(text);
  expect(r.kind).toBe('new-run');
  return h.runEnded((r as { runId: string }).runId);
}

describe('/compact from a person whose token budget is spent', () => {
  it('is refused before the summarizer is called: no summarizer request, nothing compacted, nothing charged', async () => {
    script({ text: 'Noted.', usage: { prompt_tokens: 1500, completion_tokens: 10 } }, { text: 'A summary of the import.' });
    await start({ identity: { tokensPerDay: 1000 } });

    expect(await say('hello')).toMatchObject({ outcome: 'completed' });
    expect(await personCharged()).toBe(1510);
    // Long messages, each the input of a run the spent budget refuses: material for a summary.
    for (let i = 0; i < 5; i++) expect(await say(`${i}: ${LONG}`)).toMatchObject({ outcome: 'failed', reason: 'budget' });
    expect(h.outbound.texts).toHaveLength(2);
    expect(h.outbound.texts[1]).toMatch(SPENT);

    // The conversation is idle: /compact makes a run of its own, which the spent budget refuses too.
    for (let i = 0; i < 2; i++) {
      const r = await h.dispatch.requestCompaction(h.source());
      expect(r.kind).toBe('new-run');
      await h.queue.enqueue(CID, (r as { runId: string }).runId);
      expect(await h.runEnded((r as { runId: string }).runId)).toMatchObject({ outcome: 'failed', reason: 'budget' });
    }
    expect(model.requests.filter(isSummarizer)).toEqual([]);
    expect(model.requests).toHaveLength(1);
    expect(await h.entries('compaction')).toEqual([]);
    expect(await personCharged()).toBe(1510);
    // Told once per window, as every refusal.
    expect(h.outbound.texts).toHaveLength(2);
    // The /compact stays requested, for a run after the window resets.
    expect((await h.dispatch.status(CID)).compactionRequestedSeq).toBeGreaterThan(0);
  });
});

describe('a compaction inside a normal run', () => {
  it("charges the summarizer's tokens to the person's budget, as a model step's", async () => {
    const SUMMARY_USAGE = { prompt_tokens: 7777, completion_tokens: 333 };
    script({ text: 'Noted: the import is slow; batching should help.' }, { text: 'The user described a slow nightly import.', usage: SUMMARY_USAGE });
    // A window of 2000 usable tokens: a few long messages fill it, and a run compacts before its step.
    await start({ identity: { tokensPerDay: 10_000_000 } }, 2048);

    for (let i = 0; i < 16 && (await h.entries('compaction')).length === 0; i++)
      expect(await say(`${i}: ${LONG.slice(0, 600)}`)).toMatchObject({ outcome: 'completed' });
    expect(await h.entries('compaction')).toHaveLength(1);
    const summaries = model.requests.filter(isSummarizer);
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.usage).toMatchObject(SUMMARY_USAGE);

    // Every agent step's reported usage, and the summarizer's.
    const steps = model.requests.filter((r) => !isSummarizer(r)).reduce((n, r) => n + r.usage!.prompt_tokens + r.usage!.completion_tokens, 0);
    expect(await personCharged()).toBe(steps + SUMMARY_USAGE.prompt_tokens + SUMMARY_USAGE.completion_tokens);
  });
});
