/**
 * Durable tool results across a crash: a runner process is killed (`kill -9`)
 * while a tool batch is in flight, another takes the run over. The model
 * would phrase the batch differently if asked again, but it is not asked: the
 * takeover finishes the step from the calls recorded before any ran. The call
 * that had completed is replayed, not executed; the idempotent one that had
 * only started runs again with the same idempotency key; the non-idempotent
 * one is not run again and the model is told its outcome is unknown. A call
 * recorded but never started runs.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { earlierApprovalRequests, pendingToolCalls, toolInputHash, usedApprovals } from '../../runner/tools/journal.js';
import { decideApproval } from '../../src/protocol/approvals.js';
import { answerQuestion } from '../../src/protocol/questions.js';
import { Runs } from '../../src/protocol/runs.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { uploadsKey } from '../fixtures/runner-child.js';
import { crashRunnerSettings, recordedSends, startRunnerProcess } from '../fixtures/runner-processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl } from '../helpers/redis.js';
import { fakeModel, refundTool, testWorld } from '../runner/harness.js';

const SCRIPT = fileURLToPath(new URL('./fixtures/tool-runner.ts', import.meta.url));

// The runner processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

const BATCH = [
  { name: 'note', args: { item: 'n1' } },
  { name: 'pay', args: { item: 'invoice-7' } },
  { name: 'lookup', args: { item: 'order-9' } },
];
/** What the model answers when asked for the same step again: the same intent, other words. */
const REPHRASED = [
  { name: 'note', args: { item: 'N1' } },
  { name: 'pay', args: { item: 'invoice 7' } },
  { name: 'lookup', args: { item: 'order 9' } },
];

/** Tool results of an OpenAI request, by tool call id. */
function toolResults(body: { messages: Array<{ role: string; tool_call_id?: string; content?: string }> }): Record<string, unknown> {
  return Object.fromEntries(body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, JSON.parse(m.content!)]));
}

// The cases below with processes each have their own world (model, harness, prefix, processes): these suites run at once.
describe.concurrent('durable tool results', () => {
  it('after a runner is killed mid-batch: finishes the step from the record without asking the model; replays the completed call, re-runs the idempotent one, reports the other unknown', async ({
    onTestFinished,
  }) => {
    const { fake, procs, h } = await testWorld(onTestFinished);
    // A request ending with the user's message asks for the batch; one ending with tool results, for the answer.
    fake.script((req, i) => (req.messages.at(-1).role === 'user' ? { toolCalls: i === 0 ? BATCH : REPHRASED } : { text: 'All handled.' }));
    const settings = crashRunnerSettings(redisUrl(), h.prefix, fake.url, { script: SCRIPT });
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const count = async (name: string) => Number((await h!.ctx.redis.get(`${h!.prefix}:count:${name}`)) ?? 0);

    const r = (await h.ingest('pay the invoice and look up the order')) as { runId: string };
    // The batch is in flight: `note` completed (recorded), `pay` and `lookup` started and hang; no step recorded.
    await waitFor(
      async () => (await count('pay')) === 1 && (await count('lookup')) === 1 && (await h!.entries('tool.completed')).length === 1,
      15_000,
      'batch in flight',
    );
    expect(await h.entries('tool.started')).toHaveLength(3);
    expect(await h.entries('model.step')).toHaveLength(0);
    const [recordedCalls] = await h.entries('tool.calls');
    await first.kill9();

    procs.push(await startRunnerProcess(settings));
    const ended = await h.runEnded(r.runId, 20_000);
    expect(ended.outcome).toBe('completed');
    expect((await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text)).toEqual(['All handled.']);

    // The model decided the batch once: one request for it, one for the answer (never the rephrased batch).
    expect(fake.requests).toHaveLength(2);
    // Executions: note once (replayed), lookup twice (idempotent re-run), pay once (not run again).
    expect([await count('note'), await count('lookup'), await count('pay')]).toEqual([1, 2, 1]);
    const keys = (await h.ctx.redis.lrange(`${h.prefix}:keys:lookup`, 0, -1)).map(
      (s) => JSON.parse(s) as { key: string; rerun: boolean; attempt: number; token?: number },
    );
    expect(keys.map((k) => [k.rerun, k.attempt])).toEqual([
      [false, 1],
      [true, 2],
    ]);
    expect(keys[0]!.key).toBe(keys[1]!.key);
    // Each attempt's tool calls carry that attempt's fencing token: the takeover's is higher.
    const started = await h.entries('run.started');
    expect(keys.map((k) => k.token)).toEqual(started.map((e) => e.token));
    expect(keys[1]!.token).toBeGreaterThan(keys[0]!.token!);

    // What the model was told: results of the calls it made in the first request, under their ids.
    expect(toolResults(fake.requests[1]!.body)).toEqual({
      call_0_0: { done: 'note n1', execution: 1 },
      call_0_1: { error: { tool: 'pay', category: 'outcome_unknown', message: expect.stringContaining('not run again') } },
      call_0_2: { done: 'lookup order-9', execution: 2 },
    });

    const completed = await h.entries('tool.completed');
    expect(completed.map((e) => [e.tool, e.status])).toEqual([
      ['note', 'ok'],
      ['note', 'replayed'],
      ['pay', 'unknown'],
      ['lookup', 'ok'],
    ]);
    // One step recorded for the batch: the recorded calls (written by the first attempt), with their results.
    const [step] = await h.entries('model.step');
    expect(recordedCalls!.token).toBe(started[0]!.token);
    expect(step!.token).toBe(started[1]!.token);
    expect(step!.messages[0]).toEqual(recordedCalls!.messages[0]);
    const status = await h.dispatch.status(CID);
    expect(status.activeRunId).toBeUndefined();
    // Two runner processes start (and one is killed) on a machine that may be busy.
  }, 60_000);

  it('runs a recorded call that never started, and does not ask the model for the step', async ({ onTestFinished }) => {
    const { fake, h } = await testWorld(onTestFinished);
    fake.script((req) => (req.messages.at(-1).role === 'user' ? { toolCalls: [{ name: 'refund', args: { amount: 99 } }] } : { text: 'Refunded 30.' }));
    const r = (await h.ingest('refund 30 on A-17')) as { runId: string };
    // An attempt that recorded its calls and died before any started (no runner attached yet takes the run).
    const runs = new Runs({ client: h.ctx.redis, prefix: h.prefix });
    const dead = await runs.acquire(CID, r.runId, 'dead-worker', 300);
    const ref = { conversationId: CID, runId: r.runId, token: dead.token };
    await runs.append(ref, {
      v: 1,
      kind: 'tool.calls',
      at: Date.now(),
      run: r.runId,
      token: dead.token,
      step: 0,
      finishReason: 'tool-calls',
      messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'refund', input: { amount: 30 } }] }],
    });

    const refunds: number[] = [];
    await h.startRunner(
      createLocalAgentPlugin({ model: fakeModel(fake.url), maxRetries: 0, builtins: { currentTime: false }, tools: [refundTool((a) => refunds.push(a))] }),
    );
    expect((await h.runEnded(r.runId, 15_000)).outcome).toBe('completed');

    expect(refunds).toEqual([30]);
    expect(fake.requests).toHaveLength(1);
    expect(toolResults(fake.requests[0]!.body)).toEqual({ c1: { refunded: 30 } });
    expect((await h.entries('tool.started')).map((e) => [e.call, e.run, e.token])).toEqual([['c1', r.runId, dead.token + 1]]);
    expect(h.outbound.sent.map((m) => m.text)).toEqual(['Refunded 30.']);
  });
});

describe.concurrent('durable approval wait', () => {
  it('a runner killed while waiting leaves the wait to the next one, which finds the decision made meanwhile and runs the tool once', async ({
    onTestFinished,
  }) => {
    const { fake, procs, h } = await testWorld(onTestFinished);
    fake.script((req) => (req.messages.at(-1).role === 'user' ? { toolCalls: [{ name: 'note', args: { item: 'refund-3' } }] } : { text: 'Refunded.' }));
    const settings = crashRunnerSettings(redisUrl(), h.prefix, fake.url, {
      script: SCRIPT,
      env: { TOOL_POLICY: JSON.stringify({ tools: { note: 'require_approval' } }) },
    });
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const r = (await h.ingest('refund order 3')) as { runId: string };
    const [request] = await waitFor(
      async () => (await h!.entries('approval.requested')).length === 1 && h!.entries('approval.requested'),
      15_000,
      'approval requested',
    );
    await waitFor(async () => (await recordedSends(h!.ctx.redis, h!.prefix)).length === 1, 15_000, 'approval message sent');
    // Killed once the send is acknowledged in the outbox: a kill between the platform call and that write is the
    // documented at-least-once window, which would resend the request.
    const outbox = conversationKeys(h.prefix, CID).outbox;
    await waitFor(
      async () => Object.values(await h!.ctx.redis.hgetall(outbox)).some((v) => (JSON.parse(v) as { status: string }).status === 'acknowledged'),
      15_000,
      'approval message acknowledged',
    );
    await first.kill9();

    // Decided while no runner is attached: kept, not lost.
    expect((await decideApproval(h.ctx.redis, h.prefix, CID, request!.approval, { decision: 'approved', by: 'u1' })).kind).toBe('decided');
    procs.push(await startRunnerProcess(settings));
    const ended = await h.runEnded(r.runId, 20_000);
    expect(ended.outcome).toBe('completed');

    expect(Number(await h.ctx.redis.get(`${h.prefix}:count:note`))).toBe(1);
    // One request (the takeover resumed it, re-sent under the same delivery key and skipped), one answer.
    const sends = (await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text);
    expect(sends).toHaveLength(2);
    expect(sends[0]).toContain(`/approve ${request!.approval}`);
    expect(sends[1]).toBe('Refunded.');
    expect(await h.entries('approval.requested')).toHaveLength(1);
    expect((await h.entries('run.started')).map((e) => e.attempt)).toEqual([1, 2]);
    // The takeover finished the step the call was made in: the model was asked for it once.
    expect(fake.requests).toHaveLength(2);
  }, 60_000);
});

describe.concurrent('durable question wait', () => {
  it('a runner killed while ask_user waits leaves the wait to the next one, which finds the click made meanwhile and does not ask again', async ({
    onTestFinished,
  }) => {
    const { fake, procs, h } = await testWorld(onTestFinished);
    const ask = { question: 'Which size?', options: ['Small', 'Large'] };
    fake.script((req) => (req.messages.at(-1).role === 'user' ? { toolCalls: [{ name: 'ask_user', args: ask }] } : { text: 'Large, noted.' }));
    const settings = crashRunnerSettings(redisUrl(), h.prefix, fake.url, { script: SCRIPT, env: { ASK_USER: '1' } });
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const [asked] = await waitFor(async () => (await h!.entries('question.asked')).length === 1 && h!.entries('question.asked'), 15_000, 'question asked');
    const outbox = conversationKeys(h.prefix, CID).outbox;
    await waitFor(
      async () => Object.values(await h!.ctx.redis.hgetall(outbox)).some((v) => (JSON.parse(v) as { status: string }).status === 'acknowledged'),
      15_000,
      'question acknowledged',
    );
    await first.kill9();

    // Clicked while no runner is attached: kept, not lost.
    expect((await answerQuestion(h.ctx.redis, h.prefix, CID, asked!.question, { answer: 1, by: 'u1' })).kind).toBe('answered');
    procs.push(await startRunnerProcess(settings));
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');

    const sends = (await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text);
    expect(sends).toEqual([expect.stringContaining('Which size?'), 'Large, noted.']);
    expect(await h.entries('question.asked')).toHaveLength(1);
    expect(Object.values(toolResults(fake.requests.at(-1)!.body))).toEqual([{ answer: 'Large', option: 2, by: 'u1' }]);
    expect(fake.requests).toHaveLength(2);
  }, 60_000);
});

describe.concurrent('a file upload cut by a crash', () => {
  it('a runner killed during an upload: the takeover uploads the file once more under the same delivery key, and the answer goes out once', async ({
    onTestFinished,
  }) => {
    const { fake, procs, h } = await testWorld(onTestFinished);
    const workspace = await mkdtemp(join(tmpdir(), 'steerbot-upload-'));
    await writeFile(join(workspace, 'report.pdf'), '%PDF-1.7\n%%EOF\n');
    fake.script((req) =>
      req.messages.at(-1).role === 'user'
        ? { toolCalls: [{ name: 'send_file', args: { path: 'report.pdf', caption: 'Q3' } }] }
        : { text: 'Sent you the report.' },
    );
    const settings = crashRunnerSettings(redisUrl(), h.prefix, fake.url, { script: SCRIPT, env: { SEND_FILE_WORKSPACE: workspace } });
    try {
      const first = await startRunnerProcess(settings);
      procs.push(first);
      const r = (await h.ingest('send me the report')) as { runId: string };
      const uploads = async () =>
        (await h!.ctx.redis.lrange(uploadsKey(h!.prefix), 0, -1)).map((u) => JSON.parse(u) as { name: string; deliveryKey: string; owner: string });
      // The upload is in flight (the platform has the bytes, or not) when the runner dies.
      await waitFor(async () => (await uploads()).length === 1, 15_000, 'upload started');
      await first.kill9();

      const second = await startRunnerProcess(settings);
      procs.push(second);
      expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');

      // The documented window: the cut upload and one more, both under the file's one delivery key; never a third.
      const all = await uploads();
      expect(all.map((u) => [u.name, u.owner])).toEqual([
        ['report.pdf', first.owner],
        ['report.pdf', second.owner],
      ]);
      expect(all[0]!.deliveryKey).toBe(all[1]!.deliveryKey);
      expect(all[0]!.deliveryKey).toMatch(new RegExp(`^${r.runId}:.+:0$`));
      expect((await recordedSends(h.ctx.redis, h.prefix)).map((s) => s.text)).toEqual(['[file report.pdf]', 'Sent you the report.']);
      // The model was asked for the step once: the takeover finished it from the record.
      expect(fake.requests).toHaveLength(2);
    } finally {
      await rm(workspace, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('pendingToolCalls', () => {
  const base = { v: 1 as const, at: 0, run: 'r1', token: 1 };
  let seq = 1;
  const started = (call: string, tool: string, input: unknown, extra = {}): SeqEntry => ({
    ...base,
    seq: seq++,
    kind: 'tool.started',
    call,
    tool,
    inputHash: toolInputHash(input),
    key: `k-${call}`,
    ...extra,
  });
  const completed = (call: string, tool: string, status: 'ok' | 'replayed' | 'unknown', output: unknown, extra = {}): SeqEntry => ({
    ...base,
    seq: seq++,
    kind: 'tool.completed',
    call,
    tool,
    inputHash: toolInputHash({}),
    status,
    output,
    ...extra,
  });

  it('leaves out calls whose results are in a recorded step, and calls a later attempt already accounted for', () => {
    const step: SeqEntry = {
      ...base,
      seq: seq++,
      kind: 'model.step',
      step: 0,
      messages: [{ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 't', output: { type: 'json', value: 1 } }] }],
    };
    const entries = [
      started('a', 't', {}),
      completed('a', 't', 'ok', 1),
      step,
      started('b', 't', { x: 1 }),
      completed('b', 't', 'ok', 2),
      started('c', 'u', {}),
      started('d', 'u', {}),
      completed('e', 'u', 'unknown', null, { supersedes: 'd' }),
    ];
    const pending = pendingToolCalls(entries, 'r1');
    expect(pending.map((p) => [p.call, p.result?.output])).toEqual([
      ['b', 2],
      ['c', undefined],
      // d, reported unknown under e by a later attempt, is still accounted for under e.
      ['e', undefined],
    ]);
    expect(pendingToolCalls(entries, 'other-run')).toEqual([]);
  });

  it('keeps a call that an attempt replayed or reported unknown under a new id pending for the next takeover, with its key and result', () => {
    const entries = [
      started('p1', 'pay', { amount: 1 }),
      completed('p1', 'pay', 'ok', 'paid'),
      completed('p2', 'pay', 'replayed', 'paid', { supersedes: 'p1' }),
      started('r1', 'refund', {}),
      completed('r2', 'refund', 'unknown', null, { supersedes: 'r1' }),
    ];
    const pending = pendingToolCalls(entries, 'r1');
    // A third attempt whose model rephrases the calls again finds them by tool and input: replayed, or unknown, never run.
    expect(pending.map((p) => [p.call, p.tool, p.key, p.result?.output])).toEqual([
      ['p2', 'pay', 'k-p1', 'paid'],
      ['r2', 'refund', 'k-r1', undefined],
    ]);
  });

  it('names the approvals calls ran under, which a takeover does not resume for another call', () => {
    const entries = [started('a', 'pay', {}, { approval: 'ap_1' }), started('b', 'pay', {}), started('c', 'pay', {}, { approval: 'ap_2' })];
    expect([...usedApprovals(entries, 'r1')]).toEqual(['ap_1', 'ap_2']);
    expect([...usedApprovals(entries, 'other-run')]).toEqual([]);
  });

  it('lists the approval requests and questions of a run, oldest first, for a takeover to resume', () => {
    const requested = (approval: string, tool: string, input: unknown, run = 'r1'): SeqEntry => ({
      ...base,
      run,
      seq: seq++,
      kind: 'approval.requested',
      approval,
      call: `c-${approval}`,
      tool,
      inputHash: toolInputHash(input),
      deciders: ['u1'],
      expiresAt: 1,
    });
    const asked = (question: string, run = 'r1'): SeqEntry => ({
      ...base,
      run,
      seq: seq++,
      kind: 'question.asked',
      question,
      call: `c-${question}`,
      tool: 'ask_user',
      inputHash: toolInputHash({ q: 1 }),
      deciders: ['u1'],
      expiresAt: 1,
    });
    const entries = [
      requested('ap_1', 'pay', { a: 1 }),
      requested('ap_x', 'pay', { a: 1 }, 'other-run'),
      asked('qu_1'),
      asked('qu_x', 'other-run'),
      requested('ap_2', 'note', {}),
    ];
    const [s1, , s3, , s5] = entries.map((e) => e.seq);
    expect(earlierApprovalRequests(entries, 'r1')).toEqual([
      { approval: 'ap_1', tool: 'pay', inputHash: toolInputHash({ a: 1 }), seq: s1 },
      { approval: 'qu_1', tool: 'ask_user', inputHash: toolInputHash({ q: 1 }), seq: s3 },
      { approval: 'ap_2', tool: 'note', inputHash: toolInputHash({}), seq: s5 },
    ]);
  });

  it('hashes inputs independently of key order', () => {
    expect(toolInputHash({ a: 1, b: [1, { c: 2, d: 3 }] })).toBe(toolInputHash({ b: [1, { d: 3, c: 2 }], a: 1 }));
    expect(toolInputHash({ a: 1 })).not.toBe(toolInputHash({ a: 2 }));
  });
});
