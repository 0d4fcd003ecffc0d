/**
 * Bring your own agent, end to end through a real channel: signed webhook
 * POSTs → steerbot (`loadConfig` + `startApp`, the http-agent runner serving
 * its run endpoints on the process's HTTP server) → the example agent
 * (examples/http-agent/agent.js) over HTTP → signed callbacks. A message sent
 * during the agent's slow step is steered into the same run and answered by
 * it; duplicates get one reply; a stop cuts the agent off; a runner killed
 * with SIGKILL mid-run is taken over and the agent is invoked with attempt 2.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pendingKey } from '../../plugins/webhook/keys.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { deferred } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { testPrefix } from '../helpers/redis.js';
import { SECRET } from './helpers.js';
import { CONVERSATION, type RunnerChild, type System, startRunnerChild, startSystem, systemEnv, WEBHOOK_SECRET, writeConfig } from './system.js';

type SlowStep = (a: { topic: string; run: { id: string; attempt: number }; signal: AbortSignal }) => Promise<void>;
type Agent = { url: string; requests: any[]; close(): Promise<void> };
const { startAgent } = (await import('../../examples/http-agent/agent.js')) as { startAgent(o: { secret: string; slowStep?: SlowStep }): Promise<Agent> };

/** Resolves when `signal` aborts. */
const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

let dir: string;
let callbacks: CallbackServer;
let agent: Agent | undefined;
let sys: System | undefined;
const children: RunnerChild[] = [];
/** Slow steps the agent entered, in order. */
let entered: Array<{ topic: string; runId: string; attempt: number; signal: AbortSignal }>;

/** Starts the example agent; each slow step waits for `hold(step)`. */
async function startExampleAgent(hold: (step: { attempt: number; signal: AbortSignal }) => Promise<void>): Promise<Agent> {
  return startAgent({
    secret: SECRET,
    slowStep: async ({ topic, run, signal }) => {
      entered.push({ topic, runId: run.id, attempt: run.attempt, signal });
      await hold({ attempt: run.attempt, signal });
    },
  });
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'steerbot-http-agent-'));
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  entered = [];
});
afterEach(async () => {
  for (const c of children.splice(0)) await c.kill9();
  await sys?.stop();
  sys = undefined;
  await agent?.close();
  agent = undefined;
  await callbacks.close();
  rmSync(dir, { recursive: true, force: true });
});

const drained = (s: System) =>
  waitFor(async () => (await s.app.ctx.redis.zcard(pendingKey(s.prefix, 'webhook:e2e'))) === 0 || undefined, 10_000, 'every reply called back');
const runEnded = (s: System, runId: string, timeoutMs = 10_000) =>
  waitFor(async () => (await s.entries('run.ended')).find((e) => e.run === runId), timeoutMs, `run.ended of ${runId}`);

describe('http-agent end to end through the webhook channel', () => {
  it('steers a message sent during the slow step into the same run, which answers it; duplicates get one reply', async () => {
    const release = deferred();
    agent = await startExampleAgent(({ signal }) => Promise.race([release.promise, aborted(signal)]));
    sys = await startSystem(writeConfig(dir, { agentUrl: agent.url, callbackUrl: callbacks.url }), systemEnv(testPrefix()));

    const first = await sys.post('m1', 'research the moon');
    expect(first).toMatchObject({ status: 202, body: { result: 'new-run' } });
    const runId: string = first.body.runId;
    expect(await sys.post('m1', 'research the moon')).toMatchObject({ status: 200, body: { result: 'duplicate' } });
    await waitFor(() => entered.length === 1, 10_000, 'the agent in its slow step');

    expect(await sys.post('m2', 'also mention Mars')).toMatchObject({ status: 202, body: { result: 'steered', runId } });
    expect(await sys.post('m2', 'also mention Mars')).toMatchObject({ status: 200, body: { result: 'duplicate' } });
    release.resolve();

    expect((await runEnded(sys, runId)).outcome).toBe('completed');
    await drained(sys);
    expect(callbacks.texts(CONVERSATION)).toEqual(['Research on "the moon" is done. You also said: "also mention Mars". Noted, and answered here.']);
    expect((await sys.entries('run.started')).map((e) => e.run)).toEqual([runId]);
    expect((await sys.entries('steering.injected')).map((e) => e.run)).toEqual([runId]);
    const runs = agent.requests.filter((r) => r.type === 'run');
    expect(runs.map((r) => ({ id: r.run.id, attempt: r.run.attempt, inputs: r.inputs.map((m: { text: string }) => m.text) }))).toEqual([
      { id: runId, attempt: 1, inputs: ['research the moon'] },
    ]);
    // The capability points at the process's own server.
    expect(runs[0].capability.url).toBe(`${sys.app.address}/http-agent/runs/${runId}`);
  });

  it('a /stop cuts the agent off: its stream closes, it gets a cancel, and no answer is sent', async () => {
    agent = await startExampleAgent(({ signal }) => aborted(signal));
    sys = await startSystem(writeConfig(dir, { agentUrl: agent.url, callbackUrl: callbacks.url }), systemEnv(testPrefix()));
    const runId: string = (await sys.post('s1', 'research the sun')).body.runId;
    await waitFor(() => entered.length === 1, 10_000, 'the agent in its slow step');

    expect(await sys.post('s2', '/stop')).toMatchObject({ status: 202 });
    expect((await runEnded(sys, runId)).outcome).toBe('stopped');
    await waitFor(() => entered[0]!.signal.aborted && agent!.requests.some((r) => r.type === 'cancel'), 5000, 'agent cut off and cancelled');
    expect(agent.requests.find((r) => r.type === 'cancel')).toMatchObject({ type: 'cancel', run: { id: runId, attempt: 1 }, reason: 'stop' });
    await drained(sys);
    expect(callbacks.texts(CONVERSATION).filter((t) => t.includes('Research on'))).toEqual([]);
  });

  it('takes over the run of a runner killed with SIGKILL mid-run and invokes the agent again with attempt 2; one reply', async () => {
    // Attempt 1 hangs in its slow step until its stream dies with its runner; attempt 2 finishes.
    agent = await startExampleAgent(({ attempt, signal }) => (attempt === 1 ? aborted(signal) : Promise.resolve()));
    const file = writeConfig(dir, { agentUrl: agent.url, callbackUrl: callbacks.url });
    const env = systemEnv(testPrefix());
    sys = await startSystem(file, { ...env, STEERBOT_RUNNER: 'false' }); // the host: ingress and callbacks only
    children.push(...(await Promise.all([startRunnerChild(file, env), startRunnerChild(file, env)])));

    const runId: string = (await sys.post('k1', 'research the stars')).body.runId;
    await waitFor(() => entered.length === 1, 10_000, 'attempt 1 in its slow step');
    // The runner that took the run is the one whose run endpoints the agent was given: kill that one.
    const url1: string = agent.requests.find((r) => r.type === 'run').capability.url;
    const doomed = children.find((c) => url1 === `${c.address}/http-agent/runs/${runId}`)!;
    const survivor = children.find((c) => c !== doomed)!;
    expect(doomed).toBeDefined();
    await doomed.kill9();
    await waitFor(() => entered[0]!.signal.aborted || undefined, 5000, "the dead runner's stream closed at the agent");

    expect((await runEnded(sys, runId, 20_000)).outcome).toBe('completed');
    await drained(sys);
    expect(callbacks.texts(CONVERSATION)).toEqual(['Research on "the stars" is done.']);
    const runs = agent.requests.filter((r) => r.type === 'run');
    expect(runs.map((r) => ({ id: r.run.id, attempt: r.run.attempt }))).toEqual([
      { id: runId, attempt: 1 },
      { id: runId, attempt: 2 },
    ]);
    expect(runs[1].capability.url).toBe(`${survivor.address}/http-agent/runs/${runId}`);
    expect((await sys.entries('run.started')).map((e) => ({ run: e.run, attempt: e.attempt }))).toEqual([
      { run: runId, attempt: 1 },
      { run: runId, attempt: 2 },
    ]);
  });
});
