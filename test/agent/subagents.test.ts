/**
 * Subagents end to end through the runner (host ingest → Redis → runner →
 * local agent on the real provider against the fake model): `delegate` runs
 * two tasks as child runs in parallel, each in a child conversation of its
 * own, and hands their answers back as the tool result; a child is steered
 * mid-run; a run past the limit is refused and starts nothing; children
 * cannot delegate, and their inputs are owned by the parent's identity.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { childrenStatus, subagentsHost } from '../../app/features/subagents/host.js';
import { hostPurge } from '../../host/purge.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { consoleCall, serveConsole } from '../helpers/console-api.js';
import { CID, type RunnerHarness } from '../runner/harness.js';
import { offers, type Req, says, startSubagentWorld } from './subagent-world.js';

let ai: FakeOpenAIServer;
let h: RunnerHarness;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ ai, h, close } = await startSubagentWorld(3));
});
afterEach(() => close());

const toolResults = (req: Req) => req.messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(String(m.content)));
const childIds = async () => (await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).map((k) => /\{c:(.*)\}:log$/.exec(k)![1]!).sort();

describe('subagents', () => {
  it('delegate runs two tasks in parallel as child runs and returns their answers; the parent answers once', async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['find the capital of France', 'find the capital of Peru'] } }] };
        return { text: `Summary: ${results[0].results.map((r: { answer: string }) => r.answer).join(' / ')}` };
      }
      return { text: says(req, 'France') ? 'Paris' : 'Lima' };
    });
    const r = (await h.ingest('research two capitals')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    expect(h.outbound.texts).toEqual(['Summary: Paris / Lima']);

    const children = await childIds();
    expect(children).toHaveLength(2);
    for (const child of children) {
      expect(child.startsWith(`subagent:${r.runId}.`)).toBe(true);
      const [task] = (await readRange(h.redis, conversationKeys(h.prefix, child).log)).filter((e) => e.kind === 'message.received');
      // The task is an event from `delegate`, owned by the parent's identity (its spend is charged there).
      expect(task).toMatchObject({ origin: { kind: 'event', source: 'delegate', owner: 'telegram:u1' } });
    }
    // Children cannot delegate: their requests offer no subagent tools.
    const childRequests = ai.requests.filter((x) => !offers(x.body, 'delegate'));
    expect(childRequests).toHaveLength(2);
    expect(childRequests.every((x) => !offers(x.body, 'steer_subagent'))).toBe(true);
  });

  it('a child steered mid-run takes the message at its next step; results come later through subagent_results', async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['count the moons of Mars'], wait: false } }] };
        const id = results[0].started[0];
        if (results.length === 1) return { toolCalls: [{ name: 'steer_subagent', args: { id, message: 'also name them' } }] };
        if (results.length === 2) return { toolCalls: [{ name: 'subagent_results', args: { ids: [id] } }] };
        return { text: `Done: ${results[2].results[0].answer}` };
      }
      // The child: a slow first step (a tool call), then its answer, naming the moons once steered.
      if (toolResults(req).length === 0) return { toolCalls: [{ name: 'current_time', args: {} }], delayMs: 800 };
      return { text: says(req, 'also name them') ? 'Two: Phobos and Deimos' : 'Two' };
    });
    const r = (await h.ingest('how many moons has Mars?')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    expect(h.outbound.texts).toEqual(['Done: Two: Phobos and Deimos']);
    const [child] = await childIds();
    const entries = await readRange(h.redis, conversationKeys(h.prefix, child!).log);
    // One child run took both the task and the steer message, and answered once.
    expect(entries.filter((e) => e.kind === 'run.started')).toHaveLength(1);
    expect(entries.filter((e) => e.kind === 'message.received').map((e) => e.kind === 'message.received' && e.text)).toEqual([
      'count the moons of Mars',
      'also name them',
    ]);
  });

  it('a parent stopped while it waits stops its children', async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) return { toolCalls: [{ name: 'delegate', args: { tasks: ['think for a long time'] } }] };
      return { text: 'finally', delayMs: 30_000 };
    });
    const r = (await h.ingest('think hard')) as { runId: string };
    const child = await waitFor(async () => (await childIds())[0], 15_000, 'the child started');
    await waitFor(async () => (await h.redis.get(conversationKeys(h.prefix, child).active)) !== null || undefined, 15_000, 'the child running');
    await h.dispatch.requestStop(h.source(), 'stop');
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('stopped');
    const ended = await waitFor(
      async () => (await readRange(h.redis, conversationKeys(h.prefix, child).log)).find((e) => e.kind === 'run.ended'),
      20_000,
      'the child ended',
    );
    expect(ended).toMatchObject({ outcome: 'stopped' });
  });

  it('a parent stopped after delegating without waiting stops the children it never read', async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        if (toolResults(req).length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['think for a long time'], wait: false } }] };
        return { text: 'still thinking', delayMs: 30_000 };
      }
      return { text: 'finally', delayMs: 30_000 };
    });
    const r = (await h.ingest('think hard')) as { runId: string };
    const child = await waitFor(async () => (await childIds())[0], 15_000, 'the child started');
    await waitFor(async () => (await h.redis.get(conversationKeys(h.prefix, child).active)) !== null || undefined, 15_000, 'the child running');
    await h.dispatch.requestStop(h.source(), 'stop');
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('stopped');
    const ended = await waitFor(
      async () => (await readRange(h.redis, conversationKeys(h.prefix, child).log)).find((e) => e.kind === 'run.ended'),
      20_000,
      'the child ended',
    );
    expect(ended).toMatchObject({ outcome: 'stopped' });
    expect((await h.entries('message.received')).filter((e) => e.origin?.source === 'subagent')).toEqual([]);
  });

  /** The parent delegates without waiting and answers; `last` ends last. */
  async function adoptedResult(last: 'the child' | 'the parent'): Promise<void> {
    {
      ai.script((req: Req) => {
        // The run the result starts is offered no subagent tools.
        if (says(req, 'event from subagent')) return { text: 'News from your errand: Phobos and Deimos.' };
        if (offers(req, 'delegate')) {
          if (toolResults(req).length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['name the moons of Mars'], wait: false } }] };
          // The parent's last step: quick when the child ends last, slow when the parent does.
          return { text: 'On it.', delayMs: last === 'the parent' ? 2500 : 0 };
        }
        return { text: 'Phobos and Deimos', delayMs: last === 'the child' ? 1500 : 0 };
      });
      const r = (await h.ingest('name the moons of Mars, no rush')) as { runId: string };
      expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
      await h.outbound.waitForMessages(2, 20_000);
      await h.idle(15_000, CID);

      expect(h.outbound.texts).toEqual(['On it.', 'News from your errand: Phobos and Deimos.']);
      const [child] = await childIds();
      const events = (await h.entries('message.received')).filter((e) => e.origin?.source === 'subagent');
      expect(events).toEqual([
        expect.objectContaining({
          text: 'Phobos and Deimos',
          origin: expect.objectContaining({ kind: 'event', id: child, owner: 'telegram:u1', data: { subagent: child, status: 'done' } }),
        }),
      ]);
    }
  }

  it("a result nobody waited for comes to the parent's conversation once, as an event from subagent, when the child ends last", () =>
    adoptedResult('the child'));
  it("a result nobody waited for comes to the parent's conversation once, as an event from subagent, when the parent ends last", () =>
    adoptedResult('the parent'));

  it('a result the parent read is not sent again when the parent ends', async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['name a moon'] } }] };
        return { text: `Here: ${results[0].results[0].answer}` };
      }
      return { text: 'Phobos' };
    });
    const r = (await h.ingest('name a moon')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    await h.idle(15_000, CID);
    expect(h.outbound.texts).toEqual(['Here: Phobos']);
    expect((await h.entries('message.received')).filter((e) => e.origin?.source === 'subagent')).toEqual([]);
  });

  it("/status lists the active run's subagents while they work, and nothing once the run ended", async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        if (toolResults(req).length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['slow task', 'quick task'] } }] };
        return { text: 'Both done.' };
      }
      return says(req, 'slow task') ? { text: 'slow answer', delayMs: 3000 } : { text: 'quick answer' };
    });
    const r = (await h.ingest('do two tasks')) as { runId: string };
    const lines = await waitFor(
      async () => {
        const l = await childrenStatus(h.redis, h.prefix, CID, 3);
        return l[0]?.startsWith('Subagents: 1 running, 1 finished') ? l : undefined;
      },
      15_000,
      'one subagent finished, one running',
    );
    expect(lines).toEqual([expect.stringMatching(new RegExp(`^Subagents: 1 running, 1 finished \\(subagent:${r.runId}\\.[0-9a-f]{12}\\.1\\)\\.$`))]);
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    expect(await childrenStatus(h.redis, h.prefix, CID, 3)).toEqual([]);
  });

  it("the console's run tree shows a run's children with their answers, and a child's parent", async () => {
    ai.script((req: Req) => {
      if (offers(req, 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['find the capital of France', 'find the capital of Peru'] } }] };
        return { text: 'Both found.' };
      }
      return { text: says(req, 'France') ? 'Paris <b>is</b> the capital' : 'Lima' };
    });
    const r = (await h.ingest('research two capitals')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    const config = { ...h.ctx.config, subagents: { enabled: true, maxPerRun: 3, timeoutSeconds: 60 } };
    const feature = subagentsHost({
      config,
      logger: h.ctx.logger,
      redis: h.redis,
      prefix: h.prefix,
      identities: undefined as never,
      channelIds: [],
      connectRedis: h.ctx.connectRedis,
      purge: hostPurge(h.dispatch.options, []),
    });
    const http = await serveConsole(h, { features: [feature] });
    try {
      const tree = await consoleCall(http, 'GET', `/subagents?${new URLSearchParams({ conversation: CID, run: r.runId })}`);
      expect(tree.status).toBe(200);
      const children = await childIds();
      expect(tree.body).toEqual({
        conversation: CID,
        run: r.runId,
        children: [
          { id: children.find((c) => c.endsWith('.1')), status: 'done', answer: 'Paris <b>is</b> the capital' },
          { id: children.find((c) => c.endsWith('.2')), status: 'done', answer: 'Lima' },
        ],
      });
      const child = await consoleCall(http, 'GET', `/subagents?${new URLSearchParams({ conversation: children[0]! })}`);
      expect(child.body).toMatchObject({ conversation: children[0], parent: { conversation: CID, run: r.runId }, children: [] });
      // A bad id is refused before anything is read; the page's script sets every text as text.
      expect((await consoleCall(http, 'GET', '/subagents?conversation=a%20b')).status).toBe(400);
      const page = await http.inject({ method: 'GET', url: '/console/subagents.js', headers: { authorization: 'Bearer console-token-0123456789' } });
      expect(page.statusCode).toBe(200);
      expect(page.body).not.toContain('innerHTML');
    } finally {
      await http.close();
    }
  });

  it('refuses more subagents than the run may start, starting none', async () => {
    ai.script((req: Req) => {
      if (toolResults(req).length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['a', 'b', 'c', 'd'] } }] };
      return { text: 'Too many.' };
    });
    const r = (await h.ingest('do four things')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    expect(toolResults(ai.requests[1]!.body)[0]).toMatchObject({ error: { tool: 'delegate', category: 'invalid_input' } });
    expect(await childIds()).toEqual([]);
  });

  it('counts subagents across parallel delegate calls of one step: past the limit one call is refused and starts none', async () => {
    ai.script((req: Req) => {
      if (!offers(req, 'delegate')) return { text: 'child answer' };
      if (toolResults(req).length === 0)
        return {
          toolCalls: [
            { id: 'call_a', name: 'delegate', args: { tasks: ['task a1', 'task a2'] } },
            { id: 'call_b', name: 'delegate', args: { tasks: ['task b1', 'task b2'] } },
          ],
        };
      return { text: 'Done.' };
    });
    const r = (await h.ingest('do four things in two calls')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    const results = toolResults(ai.requests.find((x) => offers(x.body, 'delegate') && toolResults(x.body).length > 0)!.body);
    expect(results.filter((x) => x.error?.category === 'invalid_input')).toHaveLength(1);
    expect(results.filter((x) => x.results)).toHaveLength(1);
    expect(await childIds()).toHaveLength(2);
  });

  it('steering a conversation that is not its child is refused', async () => {
    ai.script((req: Req) => {
      if (toolResults(req).length === 0) return { toolCalls: [{ name: 'steer_subagent', args: { id: 'telegram:99', message: 'hello' } }] };
      return { text: 'Refused.' };
    });
    const r = (await h.ingest('poke someone')) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    expect(toolResults(ai.requests[1]!.body)[0]).toMatchObject({ error: { tool: 'steer_subagent', category: 'not_found' } });
    expect(await h.redis.exists(conversationKeys(h.prefix, 'telegram:99').log)).toBe(0);
  });
});
