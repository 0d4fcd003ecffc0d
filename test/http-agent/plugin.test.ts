/**
 * The http-agent runner plugin through the real runtime (ingest → Redis →
 * BullMQ → executor → plugin → a scripted agent over HTTP → delivery), with
 * its run endpoints on a real Fastify server: the request it signs, steering
 * pulls fenced to the invocation and ordered after the agent's events, stops,
 * timeouts, and bad input that fails the run writing nothing.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NOTICES } from '../../plugins/http-agent/failure.js';
import { STATE_KEY } from '../../plugins/http-agent/invocation.js';
import type { RunCapability } from '../../plugins/http-agent/protocol.js';
import { DEFAULT_CUT_OFF_MARKER } from '../../runner/projection.js';
import { ConversationState } from '../../src/protocol/state.js';
import type { IngestResult } from '../../src/protocol/types.js';
import { CID, deferred } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { type AgentRig, pullSteering, type RunTools, type ScriptedAgent, startRig, startScriptedAgent } from './helpers.js';

const RUN_REQUEST_SCHEMA = JSON.parse(readFileSync('docs/external-agent.schema.json', 'utf8')).$defs.runRequest;
const runIdOf = (r: IngestResult): string => {
  expect(r.kind, JSON.stringify(r)).toBe('new-run');
  return (r as Extract<IngestResult, { kind: 'new-run' }>).runId;
};
const toolCall = (id: string) => ({
  type: 'step',
  messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: id, toolName: 'lookup', input: { q: 'x' } }] }],
});
const toolResult = (id: string) => ({
  type: 'step',
  messages: [{ role: 'tool', content: [{ type: 'tool-result', toolCallId: id, toolName: 'lookup', output: { type: 'text', value: 'found' } }] }],
});
const stateOf = (rig: AgentRig) => new ConversationState({ client: rig.h.ctx.redis, prefix: rig.h.prefix }).get(CID, STATE_KEY);

describe('http-agent plugin', () => {
  let agent: ScriptedAgent | undefined;
  let rig: AgentRig | undefined;
  afterEach(async () => {
    await rig?.close();
    await agent?.close();
    rig = undefined;
    agent = undefined;
  });

  describe('a run invocation', () => {
    it('POSTs a signed request with inputs, history, state and a run capability, records and delivers the answer, and keeps the state for the next run', async () => {
      agent = await startScriptedAgent((run, t) => {
        t.start();
        t.send({ type: 'typing' });
        t.send({ type: 'message', text: `answer to ${run.inputs.map((m) => m.text).join(' + ')}` });
        t.send({ type: 'state', key: 'turns', value: (Number(run.state.turns) || 0) + 1 });
        t.send({ type: 'result', outcome: 'completed' });
      });
      rig = await startRig({ url: agent.url });
      const first = await rig.h.ingest('hello agent');
      const runId = runIdOf(first);
      expect((await rig.h.runEnded(runId)).outcome).toBe('completed');
      await rig.h.idle();
      expect(rig.h.outbound.texts).toEqual(['answer to hello agent']);

      const [req] = agent.requests;
      expect(req!.signatureProblem).toBeUndefined();
      expect(req!.body).toMatchObject({
        protocol: 'steerbot.agent/1',
        type: 'run',
        run: { id: runId, conversationId: CID, attempt: 1 },
        inputs: [{ seq: first.seq, text: 'hello agent', sender: { id: 'u1', name: 'Ann' }, at: expect.any(Number) }],
        state: {},
        capability: { url: `${rig.address}/http-agent/runs/${runId}`, token: expect.stringMatching(/^[A-Za-z0-9_-]{32}$/) },
        limits: { maxEventBytes: 1_048_576, maxMessageChars: 32_000, maxStateBytes: 65_536 },
      });
      expect(req!.body.history.at(-1)).toEqual({ role: 'user', content: 'hello agent' });
      // Exactly the fields docs/external-agent.schema.json documents.
      expect(Object.keys(req!.body).sort()).toEqual(Object.keys(RUN_REQUEST_SCHEMA.properties).sort());
      const steps = await rig.h.entries('model.step');
      expect(steps.map((s) => ({ run: s.run, finishReason: s.finishReason, messages: s.messages }))).toEqual([
        { run: runId, finishReason: 'stop', messages: [{ role: 'assistant', content: [{ type: 'text', text: 'answer to hello agent' }] }] },
      ]);
      expect(await stateOf(rig)).toEqual({ turns: 1 });

      const second = runIdOf(await rig.h.ingest('and again'));
      expect((await rig.h.runEnded(second)).outcome).toBe('completed');
      const next = agent.runs()[1]!;
      expect(next.state).toEqual({ turns: 1 });
      expect(next.history.map((m) => m.content)).toEqual(['hello agent', [{ type: 'text', text: 'answer to hello agent' }], 'and again']);
      expect(await stateOf(rig)).toEqual({ turns: 2 });
    });
  });

  describe('connections', () => {
    it('sends one run after another over one kept-alive connection to the agent', async () => {
      agent = await startScriptedAgent((run, t) => {
        t.start();
        t.send({ type: 'message', text: `re: ${run.inputs[0]!.text}` });
        t.send({ type: 'result', outcome: 'completed' });
      });
      rig = await startRig({ url: agent.url });
      for (const text of ['one', 'two', 'three']) {
        expect((await rig.h.runEnded(runIdOf(await rig.h.ingest(text)))).outcome).toBe('completed');
        await rig.h.idle();
      }
      expect(rig.h.outbound.texts).toEqual(['re: one', 're: two', 're: three']);
      expect(agent.connections()).toBe(1);
    });
  });

  describe('steering', () => {
    it('hands the agent a message sent mid-run when it pulls, after the events it wrote before the pull', async () => {
      const gate = deferred();
      const pullArrived = deferred();
      let pulled: { status: number; body: any } | undefined;
      agent = await startScriptedAgent(async (run, t) => {
        t.start();
        if (run.inputs[0]!.text !== 'look something up') {
          t.send({ type: 'message', text: 'unexpected invocation' });
          t.send({ type: 'result', outcome: 'completed' });
          return;
        }
        t.send(toolCall('c1'));
        await gate.promise; // the slow tool
        // The pull overtakes the tool result it names (eventsSent counts it): the runner applies the result first.
        const pull = t.pull('all', { eventsSent: t.eventsSent + 1 });
        await pullArrived.promise;
        t.send(toolResult('c1'));
        pulled = await pull;
        t.send({ type: 'message', text: `done; also: ${pulled.body.messages.map((m: { text: string }) => m.text).join(', ')}` });
        t.send({ type: 'result', outcome: 'completed' });
      });
      rig = await startRig({ url: agent.url }, { onRequest: (url) => url.endsWith('/steering') && pullArrived.resolve() });
      const runId = runIdOf(await rig.h.ingest('look something up'));
      await waitFor(() => agent!.runs().length === 1, 10_000, 'the run request');
      const steered = await rig.h.ingest('and the weather too');
      expect(steered).toMatchObject({ kind: 'steered', runId });
      gate.resolve();

      expect((await rig.h.runEnded(runId)).outcome).toBe('completed');
      await rig.h.idle();
      expect(pulled).toMatchObject({ status: 200, body: { messages: [{ seq: steered.seq, text: 'and the weather too', sender: { id: 'u1' } }] } });
      expect(rig.h.outbound.texts).toEqual(['done; also: and the weather too']);
      expect((await rig.h.entries('run.started')).map((e) => e.run)).toEqual([runId]);
      // Record order: the tool call, its result, the injection, the answer.
      const kinds = (await rig.h.record())
        .filter((e) => e.kind === 'model.step' || e.kind === 'steering.injected')
        .map((e) => (e.kind === 'model.step' ? `step:${e.finishReason}` : e.kind));
      expect(kinds).toEqual(['step:tool-calls', 'step:tool-calls', 'steering.injected', 'step:stop']);
      expect(rig.probe.of(runId).flatMap((i) => i.pulled)).toEqual([steered.seq]);
    });

    it('refuses a pull without a token (401), with a wrong token (409), with a bad body (400), and once the invocation ended (410)', async () => {
      const answers: Record<string, { status: number; body: any }> = {};
      let capability: RunCapability | undefined;
      agent = await startScriptedAgent(async (run, t) => {
        capability = run.capability;
        t.start();
        const res = await fetch(`${run.capability!.url}/steering`, { method: 'POST', body: '{"eventsSent":0}' });
        answers.none = { status: res.status, body: await res.json() };
        answers.wrong = await t.pull('all', { token: 'x'.repeat(32) });
        answers.bad = await pullSteering(run.capability!, { mode: 'some' });
        answers.good = await t.pull('one');
        t.send({ type: 'message', text: 'ok' });
        t.send({ type: 'result', outcome: 'completed' });
      });
      rig = await startRig({ url: agent.url });
      const runId = runIdOf(await rig.h.ingest('check the fences'));
      expect((await rig.h.runEnded(runId)).outcome).toBe('completed');
      expect(answers.none).toMatchObject({ status: 401, body: { code: 'unauthorized' } });
      expect(answers.wrong).toMatchObject({ status: 409, body: { code: 'stale-token', error: expect.stringContaining('stale') } });
      expect(answers.bad).toMatchObject({ status: 400, body: { code: 'bad-request', error: expect.stringContaining('mode') } });
      expect(answers.good).toEqual({ status: 200, body: { messages: [] } });
      expect(await pullSteering(capability!, { mode: 'all', eventsSent: 2 })).toMatchObject({ status: 410, body: { code: 'run-ended' } });
      expect(await rig.h.entries('steering.injected')).toEqual([]);
    });
  });

  describe('a stop request', () => {
    it('closes the stream, sends a signed cancel, and keeps the streamed text as a partial answer', async () => {
      const streamed = deferred();
      let closed = false;
      agent = await startScriptedAgent(async (_run, t) => {
        t.start();
        t.send({ type: 'text-delta', text: 'Partial ans' });
        t.send({ type: 'text-delta', text: 'wer so far' });
        await t.pull(); // returns once the runner applied both deltas
        streamed.resolve();
        await t.closed;
        closed = true;
      });
      rig = await startRig({ url: agent.url });
      const runId = runIdOf(await rig.h.ingest('write me an essay'));
      await streamed.promise;
      expect(await rig.h.dispatch.requestStop(rig.h.source(), 'stop')).toMatchObject({ kind: 'requested', runId });

      expect((await rig.h.runEnded(runId)).outcome).toBe('stopped');
      await waitFor(() => closed && agent!.cancels().length === 1, 5000, 'stream closed and cancel received');
      const cancel = agent.requests.find((r) => r.body.type === 'cancel')!;
      expect(cancel.signatureProblem).toBeUndefined();
      expect(cancel.body).toEqual({ protocol: 'steerbot.agent/1', type: 'cancel', run: { id: runId, conversationId: CID, attempt: 1 }, reason: 'stop' });
      const steps = await rig.h.entries('model.step');
      expect(steps.map((s) => ({ partial: s.partial, messages: s.messages }))).toEqual([
        { partial: true, messages: [{ role: 'assistant', content: [{ type: 'text', text: 'Partial answer so far' }] }] },
      ]);
      await rig.h.idle();
      expect(rig.h.outbound.texts).toEqual([]);
    });
  });

  describe('an interrupting message', () => {
    it.each([
      ['interrupt', 'interrupted', true],
      ['supersede', 'superseded', false],
    ] as const)('(%s) cuts the agent off; the next run sees the partial answer only when it was an interrupt', async (policy, outcome, seen) => {
      const streamed = deferred();
      agent = await startScriptedAgent(async (run, t) => {
        t.start();
        if (run.inputs[0]!.text === 'a long essay') {
          t.send({ type: 'text-delta', text: 'Partial essay' });
          await t.pull();
          streamed.resolve();
          await t.closed;
          return;
        }
        t.send({ type: 'message', text: 'on to the next' });
        t.send({ type: 'result', outcome: 'completed' });
      });
      rig = await startRig({ url: agent.url });
      const runId = runIdOf(await rig.h.ingest('a long essay'));
      await streamed.promise;
      expect(await rig.h.ingest('no, something else', { policy })).toMatchObject({ kind: 'interrupting', runId, stop: policy });

      expect((await rig.h.runEnded(runId)).outcome).toBe(outcome);
      await waitFor(() => agent!.runs().length === 2, 10_000, 'the next run');
      await rig.h.idle();
      expect(agent.cancels()).toMatchObject([{ run: { id: runId }, reason: policy }]);
      expect((await rig.h.entries('model.step')).filter((e) => e.run === runId).map((e) => e.partial)).toEqual([true]);
      const next = JSON.stringify(agent.runs()[1]!.history);
      expect(next.includes('Partial essay')).toBe(seen);
      if (seen) expect(next).toContain(DEFAULT_CUT_OFF_MARKER);
      expect(rig.h.outbound.texts).toEqual(['on to the next']);
    });
  });

  describe('failures', () => {
    // One rig for every case: the script picks its behaviour by the message text. Follow-up runs are off
    // (the agent would fail them the same way): each case is one run, and what the person is told at its end.
    /** What the person is told when the run fails on `text`: the notice, then the message not answered. */
    const toldFailed = (notice: string, text: string) =>
      `${notice}\n\nThe run failed before answering this message: “${text}”. Please send again what still needs an answer.`;
    /** Starts a 200 NDJSON response and writes `events`. */
    const stream = (t: RunTools, ...events: unknown[]) => {
      t.start();
      for (const e of events) t.send(e);
    };
    const behaviours: Record<string, (t: RunTools) => Promise<void> | void> = {
      'no headers': (t) => t.closed,
      'no first event': (t) => {
        t.start();
        return t.closed;
      },
      'goes idle': (t) => {
        stream(t, { type: 'typing' });
        return t.closed;
      },
      'keeps alive': async (t) => {
        t.start();
        // A slow agent (slow on purpose: the test waits for the outcome, not for time): silent for longer
        // than the idle timeout in all, but never for long between keep-alives.
        for (let i = 0; i < 8; i++) {
          t.raw('\n');
          await new Promise((r) => setTimeout(r, 300));
        }
        t.send({ type: 'message', text: 'slow but alive' });
        t.send({ type: 'result', outcome: 'completed' });
      },
      'not json': (t) => {
        t.start();
        t.raw('{"type": "message", "text": \n');
      },
      'unknown type': (t) => stream(t, { type: 'confetti', colour: 'red' }),
      'missing text': (t) => stream(t, { type: 'message' }),
      'long message': (t) => stream(t, { type: 'message', text: 'x'.repeat(51) }),
      'huge event': (t) => stream(t, { type: 'message', text: 'x'.repeat(2000) }),
      'big state': (t) => stream(t, { type: 'state', key: 'notes', value: 'x'.repeat(200) }),
      'textless step': (t) => stream(t, { type: 'step', messages: [{ role: 'assistant', content: 'just words' }] }),
      'two answers': (t) => stream(t, { type: 'message', text: 'one' }, { type: 'message', text: 'two' }),
      'no result': (t) => stream(t, { type: 'typing' }),
      'reports failure': (t) => stream(t, { type: 'result', outcome: 'failed', reason: 'upstream LLM quota exhausted', message: 'I am out of budget today.' }),
      'http 500': (t) => t.start(500, 'application/json'),
      'html page': (t) => {
        t.start(200, 'text/html');
        t.raw('<html>');
      },
    };
    let shared: AgentRig;
    let scripted: ScriptedAgent;
    beforeAll(async () => {
      scripted = await startScriptedAgent((run, t) => behaviours[run.inputs[0]!.text]!(t));
      shared = await startRig(
        {
          url: scripted.url,
          connectTimeoutMs: 1000,
          firstEventTimeoutMs: 1000,
          idleTimeoutMs: 1500,
          maxMessageChars: 50,
          maxEventBytes: 1024,
          maxStateBytes: 100,
        },
        { followUpsOnFailure: 0 },
      );
    });
    afterAll(async () => {
      await shared.close();
      await scripted.close();
    });

    /** Sends `text`; returns how the run ended, what the user got, and the steps it recorded. */
    async function outcomeOf(text: string) {
      const sentBefore = shared.h.outbound.sent.length;
      const runId = runIdOf(await shared.h.ingest(text));
      const ended = await shared.h.runEnded(runId);
      await shared.h.idle();
      const steps = (await shared.h.entries('model.step')).filter((s) => s.run === runId);
      return { outcome: ended.outcome, reason: ended.reason, told: shared.h.outbound.texts.slice(sentBefore), steps: steps.length };
    }

    it.each([
      ['no headers', 'connect-timeout'],
      ['no first event', 'first-event-timeout'],
      ['goes idle', 'idle-timeout'],
    ])('a timeout (%s) ends the invocation failed with %s and tells the user', async (text, code) => {
      expect(await outcomeOf(text)).toEqual({
        outcome: 'failed',
        reason: expect.stringMatching(new RegExp(`^http-agent ${code}: `)),
        told: [toldFailed(NOTICES.timeout, text)],
        steps: 0,
      });
    });

    it('blank keep-alive lines keep a slow agent within the idle timeout', async () => {
      expect(await outcomeOf('keeps alive')).toEqual({ outcome: 'completed', reason: undefined, told: ['slow but alive'], steps: 1 });
    });

    it.each([
      ['not json', 'malformed-event', 'not JSON'],
      ['unknown type', 'unknown-event', 'confetti'],
      ['missing text', 'malformed-event', 'text'],
      ['long message', 'message-too-long', '50'],
      ['huge event', 'event-too-large', '1024 bytes'],
      ['big state', 'state-too-large', 'the cap is 100'],
      ['textless step', 'protocol-violation', 'tool call'],
      ['no result', 'no-result', 'without a result'],
    ])('bad input (%s) ends the invocation failed with %s, a short message to the user, and nothing of it written', async (text, code, detail) => {
      const before = await stateOf(shared);
      const got = await outcomeOf(text);
      expect(got).toEqual({
        outcome: 'failed',
        reason: expect.stringMatching(new RegExp(`^http-agent ${code}: `)),
        told: [toldFailed(NOTICES.badInput, text)],
        steps: 0,
      });
      expect(got.reason).toContain(detail);
      expect(await stateOf(shared)).toEqual(before);
    });

    it('a second answer in one turn is refused after the first was recorded and delivered', async () => {
      expect(await outcomeOf('two answers')).toEqual({
        outcome: 'failed',
        reason: expect.stringMatching(/^http-agent protocol-violation: a message event after the turn's answer/),
        told: ['one', NOTICES.badInput],
        steps: 1,
      });
    });

    it("an agent's reported failure ends the run failed with its reason and its message", async () => {
      expect(await outcomeOf('reports failure')).toEqual({
        outcome: 'failed',
        reason: 'http-agent agent-failed: upstream LLM quota exhausted',
        told: [toldFailed('I am out of budget today.', 'reports failure')],
        steps: 0,
      });
    });

    it.each([
      ['http 500', 'http-status', 'HTTP 500'],
      ['html page', 'bad-content-type', 'text/html'],
    ])('an agent that answers with no event stream (%s) ends the run failed with %s', async (text, code, detail) => {
      const got = await outcomeOf(text);
      expect(got).toEqual({
        outcome: 'failed',
        reason: expect.stringMatching(new RegExp(`^http-agent ${code}: `)),
        told: [toldFailed(NOTICES.unreachable, text)],
        steps: 0,
      });
      expect(got.reason).toContain(detail);
    });
  });

  it('an unreachable agent ends the run failed (unreachable) and tells the user', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    rig = await startRig({ url: `http://127.0.0.1:${port}/agent` });
    const runId = runIdOf(await rig.h.ingest('anyone there?'));
    expect(await rig.h.runEnded(runId)).toMatchObject({
      outcome: 'failed',
      reason: expect.stringMatching(/^http-agent unreachable: request failed: ECONNREFUSED/),
    });
    // Two follow-up runs find it unreachable too; then the person is told, once.
    await waitFor(async () => (await rig!.h.entries('run.ended')).length === 3, 10_000, 'three runs ended');
    await rig.h.idle();
    expect((await rig.h.entries('run.ended')).map((e) => e.outcome)).toEqual(['failed', 'failed', 'failed']);
    expect(rig.h.outbound.texts).toEqual([
      `${NOTICES.unreachable}\n\nThe run failed 3 times in a row before answering this message: “anyone there?”. Please send again what still needs an answer.`,
    ]);
  });
});
