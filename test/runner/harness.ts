/**
 * Our runner tests' harness: the test kit's `RunnerHarness` plus helpers
 * tied to our own plugins and model wiring (a per-test fake model, a gated
 * local-agent tool, a fetch tap for the model's HTTP traffic).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import { afterEach, beforeEach, type OnTestFinishedHandler } from 'vitest';
import { z } from 'zod';
import { commandSet } from '../../host/commands/index.js';
import { hostPurge } from '../../host/purge.js';
import type { AgentTool } from '../../plugins/local-agent/index.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { deferred, RunnerHarness } from '../../testing/runner-harness.js';
import type { RunnerProcess } from '../fixtures/runner-processes.js';
import { redisUrl } from '../helpers/redis.js';

export { CID, deferred, RunnerHarness } from '../../testing/runner-harness.js';
export { waitFor } from '../../testing/wait.js';

/** The fake model server and the harness of the running test (see `perTestModel`). */
export interface PerTest {
  fake: FakeOpenAIServer;
  /** Set by the test when it starts one; closed after the test. */
  h: RunnerHarness | undefined;
  /** Runner processes the test started; killed (SIGKILL) after it, before the harness closes. */
  procs: RunnerProcess[];
}

/**
 * Registers hooks for the calling test file: a fresh fake OpenAI server
 * before each test; after it, the runner processes the test put in `procs`
 * are killed, then the harness it put in `h` (if any) and the server closed.
 */
export function perTestModel(): PerTest {
  const t = { h: undefined, procs: [] as RunnerProcess[] } as PerTest;
  beforeEach(async () => {
    t.fake = await startFakeOpenAI();
  });
  afterEach(async () => {
    await Promise.all(t.procs.map((p) => p.kill9()));
    t.procs = [];
    await t.h?.close();
    t.h = undefined;
    await t.fake.close();
  });
  return t;
}

/** One test's fake model, harness (on the test Redis) and the runner processes it started (see `testWorld`). */
export interface TestWorld {
  fake: FakeOpenAIServer;
  h: RunnerHarness;
  procs: RunnerProcess[];
}

/**
 * Starts a fake OpenAI server and a harness for the running test; they and the runner processes the test puts in
 * `procs` are closed when it finishes. Given the test's own `onTestFinished` (from its context), so unlike
 * `perTestModel` the tests using it can run at once.
 */
export async function testWorld(onTestFinished: (fn: OnTestFinishedHandler) => void): Promise<TestWorld> {
  const fake = await startFakeOpenAI();
  const procs: RunnerProcess[] = [];
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  onTestFinished(async () => {
    await Promise.all(procs.map((p) => p.kill9()));
    await h.close();
    await fake.close();
  });
  return { fake, h, procs };
}

/**
 * An agent tool `lookup` that blocks until the test releases it: `started`
 * resolves when the model calls it, `release(value)` answers the call.
 * `reset()` arms a fresh gate, for a tool shared by several tests.
 */
export function gatedTool(): { tool: AgentTool; readonly started: Promise<void>; release(value: string): void; reset(): void } {
  let started = deferred();
  let gate = deferred<string>();
  const tool: AgentTool = {
    name: 'lookup',
    description: 'a slow lookup',
    inputSchema: z.object({}),
    async execute() {
      started.resolve();
      return { value: await gate.promise };
    },
  };
  return {
    tool,
    get started() {
      return started.promise;
    },
    release: (value) => gate.resolve(value),
    reset() {
      started = deferred();
      gate = deferred<string>();
    },
  };
}

/** An agent tool `refund({ amount })` that reports each execution to `onRun` and answers `{ refunded: amount }`. */
export function refundTool(onRun: (amount: number) => void): AgentTool<{ amount: number }> {
  return {
    name: 'refund',
    description: 'refunds an amount',
    inputSchema: z.object({ amount: z.number() }),
    execute: async ({ amount }) => {
      onRun(amount);
      return { refunded: amount };
    },
  };
}

/**
 * Wraps `fetch` for the provider: sees the response bytes as they stream in
 * (so a test can act once some text reached the client), and can hold a
 * response back from the client until the test releases it.
 */
export class FetchTap {
  private n = 0;
  private seen = '';
  private listeners: Array<() => void> = [];
  private readonly holds = new Map<number, Promise<void>>();

  readonly fetch: typeof fetch = async (input, init) => {
    const index = this.n++;
    const res = await fetch(input, init);
    await this.holds.get(index);
    if (!res.body) return res;
    const decoder = new TextDecoder();
    const tapped = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, controller) => {
          this.seen += decoder.decode(chunk, { stream: true });
          for (const l of this.listeners.splice(0)) l();
          controller.enqueue(chunk);
        },
      }),
    );
    return new Response(tapped, { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  /** Holds the response of the `index`-th request (0-based) until `release()` is called. */
  hold(index: number): () => void {
    const gate = deferred();
    this.holds.set(index, gate.promise);
    return () => gate.resolve();
  }

  /** Resolves once the response bytes received so far (all requests) contain `text`. */
  async waitForText(text: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.seen.includes(text)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`model response did not contain ${JSON.stringify(text)} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

/** The real OpenAI-compatible provider against a fake server URL, through `tap`. */
export function fakeModel(baseURL: string, tap?: FetchTap): LanguageModel {
  return createOpenAICompatible({ baseURL, name: 'fake', apiKey: 'k', includeUsage: true, ...(tap && { fetch: tap.fetch }) }).chatModel('m');
}

/**
 * `plugin` as it runs in a conversation whose channel streams: its delivery
 * says deltas reach the user (`streams()`), so a local agent with
 * `streaming: true` streams its model calls. The harness's outbound does not
 * stream, so the deltas themselves are dropped, as before.
 */
export function onStreamingChannel(plugin: RunnerPlugin): RunnerPlugin {
  return {
    ...plugin,
    run: (ctx) => {
      const d = ctx.delivery;
      return plugin.run({
        ...ctx,
        delivery: {
          message: (text, opts) => d.message(text, opts),
          ...(d.file && { file: d.file.bind(d) }),
          ...(d.fileLimit && { fileLimit: d.fileLimit.bind(d) }),
          ...(d.voiceFormat && { voiceFormat: d.voiceFormat.bind(d) }),
          delta: (text) => d.delta(text),
          typing: () => d.typing(),
          streams: () => true,
        },
      });
    },
  };
}

/** Ingests `text`, waits for the run it made to end and the conversation to go idle (its deliveries done); returns how the run ended. */
export async function askAndSettle(h: RunnerHarness, text: string) {
  const r = (await h.ingest(text)) as { runId: string };
  const ended = await h.runEnded(r.runId);
  await h.idle();
  return ended;
}

/** The `/status` reply, as a user in the harness's conversation gets it (a command set with no feature). */
export async function statusReply(h: Pick<RunnerHarness, 'dispatch' | 'source'>): Promise<string> {
  const deps = { dispatch: h.dispatch, enqueue: async () => undefined, purge: hostPurge(h.dispatch.options, []) };
  return (await commandSet([]).run(deps, { name: 'status', args: '' }, h.source(), undefined)).reply;
}
