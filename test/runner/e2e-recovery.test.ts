/**
 * End to end: a worker process dies mid-run and another takes the run over
 * (fenced, nothing lost, one reply); a failing model ends the run `failed`
 * with a short message and the conversation goes on.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { DEFAULT_MODEL_FAILURE_MESSAGE } from '../../plugins/local-agent/loop.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { StaleRunError } from '../../src/errors.js';
import { Runs } from '../../src/protocol/runs.js';
import type { ModelStep } from '../../src/record/entries.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { contextEnv } from '../../testing/runner-context.js';
import { BUILD_WAIT_MS, builtNodeArgs, packageBuilt } from '../helpers/built-package.js';
import { readyLine } from '../helpers/child-ready.js';
import { redisUrl } from '../helpers/redis.js';
import { CID, deferred, fakeModel, RunnerHarness, waitFor } from './harness.js';

const WORKER = fileURLToPath(new URL('../fixtures/worker-process.ts', import.meta.url));

let fake: FakeOpenAIServer;
let h: RunnerHarness | undefined;
let child: ChildProcess | undefined;

// The child processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeEach(async () => {
  fake = await startFakeOpenAI();
});
afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  await h?.close();
  h = undefined;
  await fake.close();
});

/** Starts `test/fixtures/worker-process.ts` on the harness's prefix and queue; resolves with its owner id once it runs. */
async function startWorkerProcess(harness: RunnerHarness): Promise<{ proc: ChildProcess; owner: string }> {
  const proc = spawn(process.execPath, await builtNodeArgs(WORKER), {
    env: { ...process.env, ...contextEnv({ redisUrl: redisUrl(), prefix: harness.prefix }), FAKE_OPENAI_URL: fake.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child = proc;
  const owner = await readyLine(proc, 'worker process', 15_000);
  return { proc, owner };
}

const userTexts = (i: number): string[] =>
  fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content);

describe('runner recovery', () => {
  it('takes over the run of a killed worker after its lease expires, answers the message steered meanwhile, and refuses the dead token', async () => {
    // Attempt 1's model call hangs until its client goes away; attempt 2 calls a tool, then answers.
    fake.script((_req, index) =>
      index === 0 ? { text: 'never sent', delayMs: 60_000 } : index === 1 ? { toolCalls: [{ name: 'current_time', args: {} }] } : { text: 'Recovered answer.' },
    );
    h = await RunnerHarness.start();
    const worker = await startWorkerProcess(h);

    const first = await h.ingest('first question');
    expect(first.kind).toBe('new-run');
    const runId = (first as { runId: string }).runId;
    await fake.waitForRequests(1, 15_000);
    expect(await h.dispatch.status(CID)).toMatchObject({ activeRunId: runId, runState: 'running', attempt: 1, owner: worker.owner });

    const exited = new Promise((resolve) => worker.proc.once('exit', resolve));
    worker.proc.kill('SIGKILL');
    await exited;
    await waitFor(() => fake.requests[0]!.aborted === true, 5000, 'dead worker request closed');

    const second = await h.ingest('second question, sent while the worker was dead');
    expect(second).toMatchObject({ kind: 'steered', runId });

    const survivor = await h.startRunner(createLocalAgentPlugin({ model: fakeModel(fake.url) }));
    await h.outbound.waitForMessages(1, 20_000);
    expect((await h.runEnded(runId)).outcome).toBe('completed');

    const started = await h.entries('run.started');
    expect(started.map((e) => ({ run: e.run, attempt: e.attempt, token: e.token, owner: e.owner }))).toEqual([
      { run: runId, attempt: 1, token: 1, owner: worker.owner },
      { run: runId, attempt: 2, token: 2, owner: survivor.owner },
    ]);
    // Attempt 2 pulled the steered message at its first boundary: absent before, present (once) after.
    expect(fake.requests).toHaveLength(3);
    expect(userTexts(1)).toEqual(['first question']);
    expect(userTexts(2)).toEqual(['first question', 'second question, sent while the worker was dead']);
    expect(await h.entries('steering.injected')).toMatchObject([{ run: runId, seqs: [second.seq] }]);

    await h.idle();
    expect(h.outbound.texts).toEqual(['Recovered answer.']);

    const runs = new Runs({ client: h.ctx.redis, prefix: h.prefix });
    const zombie: ModelStep = {
      v: 1,
      kind: 'model.step',
      at: Date.now(),
      run: runId,
      token: 1,
      step: 0,
      messages: [{ role: 'assistant', content: [{ type: 'text', text: 'zombie' }] }],
    };
    await expect(runs.append({ conversationId: CID, runId, token: 1 }, zombie)).rejects.toBeInstanceOf(StaleRunError);
    expect(JSON.stringify(await h.record())).not.toContain('zombie');
  });

  it('ends the run failed when the model fails; a follow-up run answers the message once the model works again, and the person sees only that answer', async () => {
    // The first request fails; the next (the follow-up's) is answered.
    fake.script((_req, index) =>
      index === 0
        ? { error: { status: 500, message: 'Error: upstream exploded\n    at Model.call (model.js:1:1)', type: 'server_error' } }
        : { text: 'Working again.' },
    );
    h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), maxRetries: 0 }) });

    const first = await h.ingest('first question');
    const firstRun = (first as { runId: string }).runId;
    const ended = await h.runEnded(firstRun);
    expect(ended.outcome).toBe('failed');
    expect(ended.reason).toBe('model API error 500');
    const followUp = await waitFor(async () => (await h!.entries('run.started')).find((e) => e.run !== firstRun), 10_000, 'the follow-up run');
    expect(followUp.inputs).toEqual([first.seq]);
    expect((await h.runEnded(followUp.run)).outcome).toBe('completed');
    await h.idle();
    expect(h.outbound.texts).toEqual(['Working again.']);
    expect(userTexts(fake.requests.length - 1)).toEqual(['first question']);
  });

  it('tells the person, once, without leaking the provider error, when the model keeps failing through the follow-ups', async () => {
    fake.script(() => ({ error: { status: 500, message: 'Error: upstream exploded\n    at Model.call (model.js:1:1)', type: 'server_error' } }));
    h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), maxRetries: 0 }) });

    await h.ingest('first question');
    await waitFor(async () => (await h!.entries('run.ended')).length === 3, 10_000, 'three runs ended');
    await h.idle();
    expect((await h.entries('run.ended')).map((e) => e.outcome)).toEqual(['failed', 'failed', 'failed']);
    const [failure, ...more] = h.outbound.texts;
    expect(more).toEqual([]);
    expect(failure).toBe(
      `${DEFAULT_MODEL_FAILURE_MESSAGE}\n\nThe run failed 3 times in a row before answering this message: “first question”. Please send again what still needs an answer.`,
    );
    expect(failure).not.toMatch(/Error|exploded|\n\s+at |500/);
  });
});

describe('an attempt that answered steering it pulled, then died before finishing', () => {
  it('is not answered again by the attempt that takes the run over', async () => {
    const steered = deferred();
    const pulled = deferred();
    const delivered = deferred();
    // Attempt 1 pulls the steered message at a boundary, answers it and then hangs until shutdown aborts it;
    // attempt 2 writes the same answer again (a retried model call would).
    const plugin: RunnerPlugin = {
      manifest: { name: 'steer-then-die', version: '1.0.0', capabilities: { steering: true, state: false } },
      async run(ctx) {
        if (ctx.run.attempt === 1) {
          pulled.resolve();
          await steered.promise;
          const messages = await ctx.steering.pull();
          expect(messages.map((m) => m.text)).toEqual(['also this']);
          await ctx.delivery.message('one answer to both');
          delivered.resolve();
          await new Promise((resolve) => ctx.stop.signal.addEventListener('abort', resolve));
          return { outcome: 'completed' };
        }
        await ctx.delivery.message('one answer to both');
        return { outcome: 'completed' };
      },
    };
    h = await RunnerHarness.start({ plugin });
    const first = await h.ingest('a question');
    const runId = (first as { runId: string }).runId;
    await pulled.promise;
    expect(await h.ingest('also this')).toMatchObject({ kind: 'steered', runId });
    steered.resolve();
    await delivered.promise;
    // The first worker goes away without finishing the run; another takes it over after its lease.
    await h.runners[0]!.close(0);
    await h.startRunner(plugin);

    expect((await h.runEnded(runId)).outcome).toBe('completed');
    expect((await h.entries('run.started')).map((e) => e.attempt)).toEqual([1, 2]);
    expect(h.outbound.texts).toEqual(['one answer to both']);
  });
});
