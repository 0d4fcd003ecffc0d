/**
 * Compaction through the real runtime: host ingest → Redis → BullMQ → runner
 * → local agent on the real `@ai-sdk/openai-compatible` provider, against the
 * fake OpenAI server. The agent's model and the summarizer are both built from
 * `config.model` (as in production); the fake tells them apart by the
 * summarizer's instructions. Assertions are on the requests the fake received
 * and on the record and state in Redis.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readConfig } from '../../app/config.js';
import { runnerFeatures } from '../../app/features/index.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_MODEL_FAILURE_MESSAGE } from '../../plugins/local-agent/loop.js';
import { CONTEXT_OVERFLOW_MESSAGE, RUN_REASON } from '../../plugins/local-agent/outcomes.js';
import { CHECKPOINT_KEY, type Checkpoint, checkpointSchema, SUMMARY_HEADER, summaryMessages } from '../../runner/compaction/checkpoint.js';
import { turnBoundaries } from '../../runner/compaction/select.js';
import { startRunner } from '../../runner/main.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, type FakeRequest, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { contextEnv } from '../../testing/runner-context.js';
import { redisUrl } from '../helpers/redis.js';
import { CID, deferred, RunnerHarness } from '../runner/harness.js';

let fake: FakeOpenAIServer;
let h: RunnerHarness;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  h = await RunnerHarness.start();
});
afterEach(async () => {
  await h.close();
  await fake.close();
});

// --- the fake model -------------------------------------------------------

type Chat = Array<{ role: string; content: unknown; tool_calls?: unknown[] }>;

/** The summarizer's instructions start with this (runner/compaction/summarize.ts). */
const SUMMARIZER_MARK = 'You maintain the running summary';
const isSummarizer = (body: any): boolean => body?.messages?.[0]?.role === 'system' && String(body.messages[0].content).startsWith(SUMMARIZER_MARK);
const summarizerRequests = (): FakeRequest[] => fake.requests.filter((r) => isSummarizer(r.body));
const agentRequests = (): FakeRequest[] => fake.requests.filter((r) => !isSummarizer(r.body));
/** Chat messages of a request, system prompt left out. */
const chat = (r: FakeRequest): Chat => r.body.messages.filter((m: { role: string }) => m.role !== 'system');
const text = (r: FakeRequest): string => JSON.stringify(r.body.messages);

const pad = (i: number) => String(i).padStart(2, '0');
/** Asks the agent to call the `slow` tool. */
const TOOL_ASK = 'Please use the slow tool.';
/** The i-th user message: a unique marker and about 300 characters. */
const userText = (i: number, extra = '') =>
  `[M${pad(i)}] ${extra}${'The nightly import of customer records took longer than usual; please check the batch size, the dedupe step and the Redis memory. '.repeat(3).slice(0, 290)}`;
/** The answer to the i-th user message: a unique marker and about 300 characters. */
const answerText = (i: number) =>
  `[A${pad(i)}] ${'Batching the dedupe checks in pipelines of 500 should bring the import back under ten minutes; memory is mostly old keys. '.repeat(3).slice(0, 290)}`;

/** The marker number of the newest user message of a request. */
function lastUserMarker(messages: Chat): number {
  for (const m of [...messages].reverse()) {
    const hit = m.role === 'user' ? /\[M(\d+)\]/.exec(String(m.content)) : null;
    if (hit) return Number(hit[1]);
  }
  return 0;
}

/** The agent by default: the slow tool when asked for it (until its result is in), else the answer to the newest user message. */
function defaultAgent(body: any): FakeTurn {
  const messages = chat({ body } as FakeRequest);
  const last = messages.at(-1);
  if (last?.role === 'user' && String(last.content).includes(TOOL_ASK)) return { toolCalls: [{ name: 'slow', args: {} }] };
  return { text: answerText(lastUserMarker(messages)) };
}

/** The summarizer by default: names the markers it was given (without brackets, so no original text survives). */
function defaultSummary(body: any): FakeTurn {
  const markers = [...new Set(String(body.messages.at(-1).content).match(/M\d\d/g) ?? [])];
  return { text: `The user asked ${markers.join(', ')} about a slow nightly import; the assistant suggested batching.` };
}

const OVERFLOW: FakeTurn = {
  error: {
    status: 400,
    type: 'invalid_request_error',
    code: 'context_length_exceeded',
    message: "This model's maximum context length is 2048 tokens. However, your messages resulted in 2412 tokens. Please reduce the length of the messages.",
  },
};

/** Scripts the fake: agent and summarizer requests answered by their own functions (`n` counts requests of that kind from 0). */
function script(o: { agent?: (body: any, n: number) => FakeTurn | undefined; summarizer?: (body: any, n: number) => FakeTurn } = {}): void {
  let agents = 0;
  let summaries = 0;
  fake.script((body) => (isSummarizer(body) ? (o.summarizer ?? defaultSummary)(body, summaries++) : (o.agent?.(body, agents++) ?? defaultAgent(body))));
}

// --- the runtime ----------------------------------------------------------

/** The tool the agent calls when asked to; `onCall` may hold it (a test's gate). */
function slowTool(onCall?: () => Promise<void>, value = 'SLOW-RESULT'): AgentTool {
  return {
    name: 'slow',
    description: 'a slow lookup',
    inputSchema: z.object({}),
    async execute() {
      await onCall?.();
      return { value };
    },
  };
}

/**
 * Starts a runner whose `config.model` (window, reserve, base URL) is loaded
 * through the env bindings like a deployment's; the local agent and the
 * summarizer are both built from it.
 */
async function start(o: { contextWindow?: number; outputReserve?: number; tools?: AgentTool[] } = {}): Promise<void> {
  const env = {
    ...contextEnv({ redisUrl: redisUrl(), prefix: h.prefix, modelBaseURL: fake.url }),
    ...(o.contextWindow !== undefined && { STEERBOT_MODEL_CONTEXT_WINDOW: String(o.contextWindow) }),
    ...(o.outputReserve !== undefined && { STEERBOT_MODEL_OUTPUT_RESERVE: String(o.outputReserve) }),
  };
  Object.assign(h.ctx.config.model, readConfig({ env }).model);
  const runner = await startRunner(h.ctx, {
    plugin: createLocalAgentPlugin({ tools: o.tools ?? [slowTool()], builtins: { currentTime: false } }),
    resolveOutbound: (cid) => (cid.startsWith('telegram:') ? h.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
}

/** One user message as a run of its own: ingests it, waits for the run to end; returns the run and its first agent request. */
async function say(i: number, extra = ''): Promise<{ runId: string; outcome: string; first: () => FakeRequest }> {
  const before = agentRequests().length;
  const r = await h.ingest(userText(i, extra));
  expect(r.kind).toBe('new-run');
  const runId = (r as { runId: string }).runId;
  const ended = await h.runEnded(runId);
  return { runId, outcome: ended.outcome, first: () => agentRequests()[before]! };
}

async function checkpoint(): Promise<Checkpoint | undefined> {
  const raw = await h.ctx.redis.hget(conversationKeys(h.prefix, CID).state, CHECKPOINT_KEY);
  return raw === null ? undefined : checkpointSchema.parse(JSON.parse(raw));
}

/** Texts of the user messages the record holds at or before / after `seq`. */
async function userTextsAround(seq: number): Promise<{ before: string[]; after: string[] }> {
  const received = await h.entries('message.received');
  return { before: received.filter((e) => e.seq <= seq).map((e) => e.text ?? ''), after: received.filter((e) => e.seq > seq).map((e) => e.text ?? '') };
}

/** Sends messages 1, 2, … (one run each) until a compaction entry appears; returns the number of the message whose run compacted. */
async function talkUntilCompaction(max: number): Promise<number> {
  for (let i = 1; i <= max; i++) {
    await say(i);
    if ((await h.entries('compaction')).length > 0) return i;
  }
  throw new Error(`no compaction within ${max} runs`);
}

const USABLE_SMALL = 2000; // contextWindow 2048 − outputReserve 48
const THRESHOLD_SMALL = 0.8 * USABLE_SMALL;

describe('compaction in the runtime', () => {
  describe('under context pressure', () => {
    it('compacts at the start of the run that crosses the threshold: record entry, valid checkpoint at a turn boundary, one summarizer call, and a prompt of summary + recent turns', async () => {
      script();
      await start({ contextWindow: 2048, outputReserve: 48 });

      const n = await talkUntilCompaction(16);
      const [entry, ...more] = await h.entries('compaction');
      expect(more).toEqual([]);
      const runs = await h.entries('run.started');
      expect(entry!.run).toBe(runs.at(-1)!.run);
      expect(entry).toMatchObject({ summarizer: 'llm' });
      expect(entry!.tokens_before).toBeGreaterThan(THRESHOLD_SMALL);
      expect(entry!.tokens_after).toBeLessThanOrEqual(THRESHOLD_SMALL);

      // The checkpoint: valid schema, this conversation, covering up to a turn boundary (a run.ended with nothing open).
      const cp = (await checkpoint())!;
      expect(cp).toMatchObject({
        conversation_id: CID,
        summarizer: 'llm',
        covers_until: entry!.covers_until,
        tokens_before: entry!.tokens_before,
        tokens_after: entry!.tokens_after,
      });
      const record = await h.record();
      expect(record.find((e) => e.seq === cp.covers_until)?.kind).toBe('run.ended');
      expect(turnBoundaries(record)).toContain(cp.covers_until);

      // One summarizer call, made in the compacting run before its agent request, over the oldest turns only.
      const summaries = summarizerRequests();
      expect(summaries).toHaveLength(1);
      const agentIndex = fake.requests.indexOf(agentRequests().at(-1)!);
      expect(fake.requests.indexOf(summaries[0]!)).toBeLessThan(agentIndex);
      const { before: summarized, after: kept } = await userTextsAround(cp.covers_until);
      expect(summarized.length).toBeGreaterThan(0);
      expect(kept).toHaveLength(4 + 1); // the default 4 recent turns + this run's message
      expect(text(summaries[0]!)).toContain(summarized[0]!.slice(0, 40));
      expect(text(summaries[0]!)).not.toContain(kept[0]!.slice(0, 5));

      // The agent's request: summary first, no summarized text, the recent turns verbatim.
      const request = chat(agentRequests().at(-1)!);
      expect(request[0]).toEqual(summaryMessages(cp)[0]);
      for (const t of summarized) expect(text(agentRequests().at(-1)!)).not.toContain(t);
      const keptTurns = kept.length - 1;
      expect(request.slice(1).map((m) => m.content)).toEqual([
        ...Array.from({ length: keptTurns }, (_, k) => [userText(n - keptTurns + k), answerText(n - keptTurns + k)]).flat(),
        userText(n),
      ]);
      expect(h.outbound.texts.at(-1)).toBe(answerText(n));

      // The next run starts from the checkpoint without compacting again, and its prompt prefix is the previous request, byte for byte.
      const next = await say(n + 1);
      expect(await h.entries('compaction')).toHaveLength(1);
      expect(summarizerRequests()).toHaveLength(1);
      const previous = JSON.stringify(agentRequests().at(-2)!.body.messages);
      expect(JSON.stringify(next.first().body.messages).startsWith(previous.slice(0, -1))).toBe(true);
    });

    it('compacts at a turn boundary when a tool result pushes the next request over the threshold', async () => {
      const big = 'Row 1042 failed the dedupe check because its key was already present in the set. '.repeat(50);
      script();
      await start({ contextWindow: 2048, outputReserve: 48, tools: [slowTool(undefined, big)] });
      for (let i = 1; i <= 5; i++) await say(i);
      expect(summarizerRequests()).toHaveLength(0);

      const run = await say(6, TOOL_ASK);
      expect(run.outcome).toBe('completed');
      const [entry] = await h.entries('compaction');
      expect(entry).toMatchObject({ run: run.runId, summarizer: 'llm' });
      expect(entry!.tokens_before).toBeGreaterThan(THRESHOLD_SMALL);
      // The summary was made between the tool call and the request that carries its result.
      const agents = agentRequests();
      expect(agents).toHaveLength(7);
      const summaryAt = fake.requests.indexOf(summarizerRequests()[0]!);
      expect(summaryAt).toBeGreaterThan(fake.requests.indexOf(agents[5]!));
      expect(summaryAt).toBeLessThan(fake.requests.indexOf(agents[6]!));
      const after = chat(agents[6]!);
      expect(String(after[0]!.content).startsWith(`${SUMMARY_HEADER}\n`)).toBe(true);
      expect(text(agents[6]!)).not.toContain(userText(1));
      expect(after.slice(-3).map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(String(after.at(-1)!.content)).toContain(big.slice(0, 200));
      expect(h.outbound.texts.at(-1)).toBe(answerText(6));
    });

    it('makes no summarizer request while runs stay under the threshold', async () => {
      script();
      await start(); // 128 000-token window
      for (let i = 1; i <= 10; i++) expect((await say(i)).outcome).toBe('completed');

      expect(agentRequests()).toHaveLength(10);
      expect(summarizerRequests()).toHaveLength(0);
      expect(await h.entries('compaction')).toEqual([]);
      expect(await checkpoint()).toBeUndefined();
    });
  });

  it('sends byte-identical prompt prefixes from run to run while no compaction happens', async () => {
    script();
    await start();
    const runs = [];
    for (let i = 1; i <= 4; i++) runs.push(await say(i));

    for (let k = 1; k < runs.length; k++) {
      const a = runs[k - 1]!.first().body.messages as unknown[];
      const b = runs[k]!.first().body.messages as unknown[];
      // The history before a's new user message, then that message too, recur unchanged at the start of b.
      expect(JSON.stringify(b.slice(0, a.length - 1))).toBe(JSON.stringify(a.slice(0, -1)));
      expect(JSON.stringify(b).startsWith(JSON.stringify(a).slice(0, -1))).toBe(true);
    }
  });

  describe('on a provider context-overflow error', () => {
    it('compacts once, retries the step, and answers', async () => {
      script({ agent: (_body, n) => (n === 2 ? OVERFLOW : undefined) });
      await start();
      await say(1);
      await say(2);

      const run = await say(3);
      expect(run.outcome).toBe('completed');
      expect(h.outbound.texts).toEqual([answerText(1), answerText(2), answerText(3)]);
      expect(h.outbound.texts).not.toContain(DEFAULT_MODEL_FAILURE_MESSAGE);

      const agents = agentRequests();
      expect(agents).toHaveLength(4); // 1, 2, the refused request, its retry
      expect(summarizerRequests()).toHaveLength(1);
      const [entry] = await h.entries('compaction');
      expect(entry).toMatchObject({ run: run.runId, summarizer: 'llm' });
      // Overflow keeps no earlier turn: the retry is the summary and this run's message.
      const retry = chat(agents[3]!);
      expect(retry.map((m) => m.role)).toEqual(['user', 'user']);
      expect(String(retry[0]!.content).startsWith(`${SUMMARY_HEADER}\n`)).toBe(true);
      expect(retry[1]!.content).toBe(userText(3));
    });

    it('ends context_overflow, telling the user, when the error repeats after the compaction, without looping', async () => {
      script({ agent: (_body, n) => (n >= 2 ? OVERFLOW : undefined) });
      await start();
      await say(1);
      await say(2);

      const run = await say(3);
      expect(run.outcome).toBe('failed');
      const [ended] = (await h.entries('run.ended')).filter((e) => e.run === run.runId);
      expect(ended!.reason).toBe(RUN_REASON.contextOverflow);
      expect(h.outbound.texts.at(-1)).toContain(`${CONTEXT_OVERFLOW_MESSAGE}\n\nThe run failed before answering this message: “`);
      expect(agentRequests()).toHaveLength(4); // the refused request and one retry after compacting
      expect(summarizerRequests()).toHaveLength(1);
      expect(await h.entries('compaction')).toHaveLength(1);
    });
  });

  describe('/compact', () => {
    it('when idle, runs a compaction of its own without calling the agent; the next message starts from the summary', async () => {
      script();
      await start();
      for (let i = 1; i <= 5; i++) await say(i);

      const r = await h.dispatch.requestCompaction(h.source());
      if (r.kind !== 'new-run') throw new Error(`expected a compaction run, got ${r.kind}`);
      await h.queue.enqueue(CID, r.runId);
      expect((await h.runEnded(r.runId)).outcome).toBe('completed');

      expect(agentRequests()).toHaveLength(5);
      expect(summarizerRequests()).toHaveLength(1);
      const [entry] = await h.entries('compaction');
      expect(entry).toMatchObject({ run: r.runId, summarizer: 'llm' });
      const cp = (await checkpoint())!;
      expect(cp.covers_until).toBe(entry!.covers_until);
      expect((await userTextsAround(cp.covers_until)).before).toEqual([userText(1)]); // 4 recent turns kept

      // The next message (with a tool call, so the run has a turn boundary) starts from the summary; the applied /compact is not applied again.
      const next = await say(6, TOOL_ASK);
      expect(next.outcome).toBe('completed');
      const first = chat(next.first());
      expect(first[0]).toEqual(summaryMessages(cp)[0]);
      expect(text(next.first())).not.toContain(userText(1));
      expect(first.at(-1)!.content).toBe(userText(6, TOOL_ASK));
      expect(summarizerRequests()).toHaveLength(1);
      expect(await h.entries('compaction')).toHaveLength(1);
    });

    it('when idle with nothing to compact, clears the request: /status stops reporting it and later runs do not retry it', async () => {
      script();
      await start();
      await say(1); // one turn: fewer than the 4 kept verbatim

      const r = await h.dispatch.requestCompaction(h.source());
      if (r.kind !== 'new-run') throw new Error(`expected a compaction run, got ${r.kind}`);
      expect((await h.dispatch.status(CID)).compactionRequestedSeq).toBe(r.seq);
      await h.queue.enqueue(CID, r.runId);
      expect((await h.runEnded(r.runId)).outcome).toBe('completed');

      expect(summarizerRequests()).toHaveLength(0);
      expect(await h.entries('compaction')).toHaveLength(0);
      expect((await h.dispatch.status(CID)).compactionRequestedSeq).toBe(0);
      // The next run starts from the plain record, with no compaction attempt of its own.
      const next = await say(2);
      expect(next.outcome).toBe('completed');
      expect(summarizerRequests()).toHaveLength(0);
      expect(lastUserMarker(chat(next.first()))).toBe(2);
    });

    it('during a run with nothing to compact, clears the request at the next turn boundary', async () => {
      const gate = deferred();
      const entered = deferred();
      script();
      await start({
        tools: [
          slowTool(async () => {
            entered.resolve();
            await gate.promise;
          }),
        ],
      });

      const r = await h.ingest(userText(1, TOOL_ASK));
      const runId = (r as { runId: string }).runId;
      await entered.promise;
      const first = await h.dispatch.requestCompaction(h.source());
      expect(first.kind).toBe('requested');
      gate.resolve();
      expect((await h.runEnded(runId)).outcome).toBe('completed');

      expect(summarizerRequests()).toHaveLength(0);
      expect((await h.dispatch.status(CID)).compactionRequestedSeq).toBe(0);
    });

    it('when idle, answers a message that joined the queued compaction run, in that run', async () => {
      script();
      await start();
      for (let i = 1; i <= 5; i++) await say(i);
      const replies = h.outbound.texts.length;

      const r = await h.dispatch.requestCompaction(h.source());
      if (r.kind !== 'new-run') throw new Error(`expected a compaction run, got ${r.kind}`);
      // The message arrives before any runner took the run: it joins it.
      const joined = await h.ingest(userText(6));
      expect(joined).toMatchObject({ kind: 'joined', runId: r.runId });
      await h.queue.enqueue(CID, r.runId);
      expect((await h.runEnded(r.runId)).outcome).toBe('completed');

      expect(summarizerRequests()).toHaveLength(1);
      expect(agentRequests()).toHaveLength(6);
      expect(text(agentRequests()[5]!)).toContain(userText(6));
      expect(h.outbound.texts).toHaveLength(replies + 1);
      expect(await h.entries('run.started')).toHaveLength(6);
    });

    it('during a run, is applied at the next turn boundary (after the tool the run is waiting for)', async () => {
      const toolStarted = deferred();
      const toolGate = deferred();
      let calls = 0;
      const tool = slowTool(async () => {
        if (++calls > 1) return;
        toolStarted.resolve();
        await toolGate.promise;
      });
      script();
      await start({ tools: [tool] });
      for (let i = 1; i <= 5; i++) await say(i);

      const r = await h.ingest(userText(6, TOOL_ASK));
      const runId = (r as { runId: string }).runId;
      await toolStarted.promise;
      const c = await h.dispatch.requestCompaction(h.source());
      expect(c).toMatchObject({ kind: 'requested', runId });
      expect(summarizerRequests()).toHaveLength(0);
      toolGate.resolve();
      expect((await h.runEnded(runId)).outcome).toBe('completed');

      expect(summarizerRequests()).toHaveLength(1);
      const [entry] = await h.entries('compaction');
      expect(entry).toMatchObject({ run: runId });
      const agents = agentRequests();
      expect(agents).toHaveLength(7); // 5 runs, then the tool call and the answer after it
      const after = chat(agents[6]!);
      expect(String(after[0]!.content).startsWith(`${SUMMARY_HEADER}\n`)).toBe(true);
      expect(text(agents[6]!)).not.toContain(userText(1));
      expect(after.slice(-3).map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
      expect(after.at(-3)!.content).toBe(userText(6, TOOL_ASK));
      expect(h.outbound.texts.at(-1)).toBe(answerText(6));

      // A later run with a turn boundary does not compact again for the same /compact.
      await say(7, TOOL_ASK);
      expect(summarizerRequests()).toHaveLength(1);
      expect(await h.entries('compaction')).toHaveLength(1);
    });
  });

  it('writes a fallback checkpoint when the summarizer fails, and the run answers normally', async () => {
    script({ summarizer: () => ({ error: { status: 500, type: 'server_error', message: 'summarizer down' } }) });
    await start({ contextWindow: 2048, outputReserve: 48 });

    const n = await talkUntilCompaction(16);
    expect(summarizerRequests().length).toBeGreaterThanOrEqual(1); // the failed call (and its retry)
    const [entry] = await h.entries('compaction');
    expect(entry).toMatchObject({ summarizer: 'fallback' });
    const cp = (await checkpoint())!;
    expect(cp).toMatchObject({ summarizer: 'fallback', covers_until: entry!.covers_until });
    // The deterministic summary: who said what, truncated.
    expect(cp.summary.split('\n')[0]).toMatch(/^User: \[M01\] /);
    expect(cp.summary).toContain('Assistant: [A01] ');

    const last = (await h.entries('run.ended')).at(-1)!;
    expect(last.outcome).toBe('completed');
    expect(h.outbound.texts.at(-1)).toBe(answerText(n));
    expect(chat(agentRequests().at(-1)!)[0]).toEqual(summaryMessages(cp)[0]);
  });

  it('opens the circuit breaker after three ineffective compactions: pressure compaction stops and /status shows it', async () => {
    script();
    // 100 usable tokens: the 4 kept turns alone are over the threshold, so every compaction is ineffective.
    await start({ contextWindow: 1024, outputReserve: 924 });
    const summariesAfter: number[] = [];
    for (let i = 1; i <= 10; i++) {
      expect((await say(i)).outcome).toBe('completed');
      summariesAfter.push(summarizerRequests().length);
    }

    // Runs 1–5 have too few complete turns to compact; 6, 7, 8 compact ineffectively; then the breaker holds.
    expect(summariesAfter).toEqual([0, 0, 0, 0, 0, 1, 2, 3, 3, 3]);
    const entries = await h.entries('compaction');
    expect(entries).toHaveLength(3);
    for (const e of entries) expect(e.tokens_after).toBeGreaterThan(0.8 * 100);
    const status = await h.dispatch.status(CID);
    expect(JSON.parse(status.compactionBreaker!)).toMatchObject({ schema_version: 1, open: true, ineffective: 3 });
    expect(h.outbound.texts).toHaveLength(10);
  });
});
