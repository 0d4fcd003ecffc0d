/**
 * Subagents across a crash: the runner holding a parent run that waits on two
 * subagents (and their runs) is killed (`kill -9`); another runner takes them
 * over. The takeover's re-run of `delegate` finds the same children (no task
 * is started twice), each child answers once, and the parent's answer is
 * delivered once.
 */
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { recordedSends, startRunnerProcess } from '../fixtures/runner-processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl } from '../helpers/redis.js';
import { perTestModel } from '../runner/harness.js';

const SCRIPT = fileURLToPath(new URL('../tools/fixtures/tool-runner.ts', import.meta.url));
// The runner processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

const t = perTestModel();

type Req = { messages: Array<{ role: string; content: unknown }>; tools?: Array<{ function: { name: string } }> };
const toolResults = (req: Req) => req.messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(String(m.content)));

describe('subagents across a crash', () => {
  it('a parent killed while its subagents run: the takeover waits for the same children, each answers once, the parent once', async () => {
    const { fake, procs } = t;
    fake.script((req: Req) => {
      if ((req.tools ?? []).some((x) => x.function.name === 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['weigh the apples', 'weigh the pears'] } }] };
        return { text: `Weighed: ${results[0].results.map((r: { answer: string }) => r.answer).join(', ')}` };
      }
      // A child: slow, so the kill lands while it runs.
      return { text: JSON.stringify(req.messages).includes('apples') ? 'apples 3 kg' : 'pears 2 kg', delayMs: 1200 };
    });
    const h = (t.h = await RunnerHarness.start({ redisUrl: redisUrl() }));
    const settings = { redisUrl: redisUrl(), prefix: h.prefix, leaseMs: 2000, heartbeatMs: 600, modelUrl: fake.url, script: SCRIPT, env: { SUBAGENTS: '1' } };
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const r = (await h.ingest('weigh the fruit')) as { runId: string };
    const children = async () => (await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).map((k) => /\{c:(.*)\}:log$/.exec(k)![1]!).sort();
    const entries = async (cid: string) => readRange(h.redis, conversationKeys(h.prefix, cid).log);
    // Both children's runs have started (their model calls are in flight): kill the runner holding everything.
    await waitFor(
      async () => {
        const ids = await children();
        if (ids.length !== 2) return false;
        return (await Promise.all(ids.map(entries))).every((es) => es.some((e) => e.kind === 'run.started'));
      },
      15_000,
      'both subagents running',
    );
    await first.kill9();
    procs.push(await startRunnerProcess(settings));
    expect((await h.runEnded(r.runId, 30_000)).outcome).toBe('completed');

    expect((await recordedSends(h.redis, h.prefix)).map((s) => s.text)).toEqual(['Weighed: apples 3 kg, pears 2 kg']);
    const ids = await children();
    expect(ids).toHaveLength(2);
    for (const id of ids) {
      const es = await entries(id);
      // One task, one run (taken over, not started again), one answer.
      expect(es.filter((e) => e.kind === 'message.received')).toHaveLength(1);
      expect(new Set(es.filter((e) => e.kind === 'run.started').map((e) => e.kind === 'run.started' && e.run)).size).toBe(1);
      expect(es.filter((e) => e.kind === 'model.step')).toHaveLength(1);
    }
  }, 60_000);

  it('two subagents in parallel, one steered mid-run, and the runner killed while they run: each child answers once, the steered one with the steer, the parent once', async () => {
    const { fake, procs } = t;
    const says = (req: Req, text: string) => JSON.stringify(req.messages).includes(text);
    fake.script((req: Req) => {
      if ((req.tools ?? []).some((x) => x.function.name === 'delegate')) {
        const results = toolResults(req);
        if (results.length === 0) return { toolCalls: [{ name: 'delegate', args: { tasks: ['weigh the apples', 'weigh the pears'], wait: false } }] };
        const [apples, pears] = results[0].started as string[];
        if (results.length === 1) return { toolCalls: [{ name: 'steer_subagent', args: { id: apples, message: 'in grams, please' } }] };
        if (results.length === 2) return { toolCalls: [{ name: 'subagent_results', args: { ids: [apples, pears] } }] };
        return { text: `Weighed: ${results[2].results.map((r: { answer: string }) => r.answer).join(' / ')}` };
      }
      // A child: slow, so the steer and the kill land while it runs.
      if (says(req, 'apples')) return says(req, 'in grams') ? { text: 'apples 3000 g' } : { text: 'apples 3 kg', delayMs: 1500 };
      return { text: 'pears 2 kg', delayMs: 1500 };
    });
    const h = (t.h = await RunnerHarness.start({ redisUrl: redisUrl() }));
    const settings = { redisUrl: redisUrl(), prefix: h.prefix, leaseMs: 2000, heartbeatMs: 600, modelUrl: fake.url, script: SCRIPT, env: { SUBAGENTS: '1' } };
    const first = await startRunnerProcess(settings);
    procs.push(first);
    const r = (await h.ingest('weigh the fruit')) as { runId: string };
    const children = async () => (await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).map((k) => /\{c:(.*)\}:log$/.exec(k)![1]!).sort();
    const entries = async (cid: string) => readRange(h.redis, conversationKeys(h.prefix, cid).log);
    const received = (es: Awaited<ReturnType<typeof entries>>) => es.filter((e) => e.kind === 'message.received');
    // Both children run, and the steer is in the apples child's record: kill the runner holding everything.
    await waitFor(
      async () => {
        const ids = await children();
        if (ids.length !== 2) return false;
        const all = await Promise.all(ids.map(entries));
        return all.every((es) => es.some((e) => e.kind === 'run.started')) && all.some((es) => received(es).length === 2);
      },
      15_000,
      'both subagents running, one steered',
    );
    await first.kill9();
    procs.push(await startRunnerProcess(settings));
    expect((await h.runEnded(r.runId, 30_000)).outcome).toBe('completed');

    const sends = (await recordedSends(h.redis, h.prefix)).map((s) => s.text);
    expect(sends).toHaveLength(1);
    expect(sends[0]).toMatch(/^Weighed: .*apples 3000 g.* \/ pears 2 kg$/s);
    for (const id of await children()) {
      const es = await entries(id);
      // The task (and, for the steered child, the steer), one run taken over rather than started again.
      expect(received(es).map((e) => e.kind === 'message.received' && e.text)).toEqual(
        received(es).length === 2 ? ['weigh the apples', 'in grams, please'] : ['weigh the pears'],
      );
      expect(new Set(es.filter((e) => e.kind === 'run.started').map((e) => e.kind === 'run.started' && e.run)).size).toBe(1);
    }
  }, 60_000);
});
