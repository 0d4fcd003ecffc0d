/**
 * The runner plugin contract: a vitest suite any runner plugin can be run
 * against, through the real runtime (host ingest → Redis → BullMQ → runner
 * executor → the plugin → recording channel outbound). The plugin is wrapped
 * in a transparent probe that records what the runtime hands it and, when a
 * test asks, holds it at the start of an invocation, holds its deliveries, or
 * injects a failure — the only ways a generic suite can put any plugin
 * "mid-run" or make it fail without knowing how it works.
 *
 * Usage, in a `*.test.ts` file:
 *
 *   import myAgent from './my-agent.js';
 *   runnerPluginContract({ name: 'my-agent', definition: myAgent, config: { temperature: 0 } });
 *
 * or, for a plugin built by hand,
 *
 *   runnerPluginContract({ name: 'my plugin', makePlugin: ({ modelBaseURL }) => createMyPlugin({ baseURL: modelBaseURL }) });
 *
 * It needs a real Redis (`redisUrl`, default `REDIS_URL` or
 * `redis://127.0.0.1:6379`); every test runs on its own key prefix and
 * BullMQ queue and deletes them after.
 *
 * A plugin that talks to a model gets the fake OpenAI-compatible server at
 * `modelBaseURL` (a definition's `deps.createModel()` and `deps.model` point
 * there); by default it answers `re: <last user message>`.
 *
 * The contract: a well-formed manifest; one reply per message and a
 * `completed` run; a message that arrives mid-run is steered into the same
 * run (steering capability) or, without it, routed by `collect` to one
 * successor run; a stop request ends the run `stopped` within a deadline and
 * a plugin invoked after the stop sends nothing; a reported failure or a
 * throw ends the run `failed` and a follow-up run answers its message; state set in
 * one run is read in the next (state capability), else the plugin writes none.
 */

import type { IngestResult } from 'steerbot/plugin';
import type { ModelSettings, RunContext, RunnerPlugin, RunnerPluginDefinition, RunResult } from 'steerbot/runner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IngestService } from '../host/ingest.js';
import { createModel } from '../runner/model.js';
import { DEFAULT_FAILURE_MESSAGE } from '../runner/run/executor.js';
import { createLogger } from '../src/logger.js';
import { Dispatch } from '../src/protocol/dispatch.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from './fakes/openai-server.js';
import { CID, deferred, RunnerHarness } from './runner-harness.js';
import { waitFor } from './wait.js';

/** What `makePlugin` gets. */
export interface RunnerContractEnv {
  /** Base URL (with `/v1`) of the fake OpenAI-compatible chat-completions server of the current test. */
  modelBaseURL: string;
  /** The fake server itself (requests it received, scripting). */
  fake: FakeOpenAIServer;
}

/** How long the suite waits for anything the runtime should do promptly, in ms. */
const DEADLINE_MS = 10_000;
/** How long a stop request may take to end a run, in ms (a bound, not a measurement). */
const STOP_DEADLINE_MS = 5_000;

/** What the runtime handed the plugin in one invocation of `run`. */
export interface Invocation {
  runId: string;
  attempt: number;
  /** Seqs of `ctx.inputs`. */
  inputs: number[];
  /** Seqs returned by `ctx.steering.pull`, in order. */
  pulled: number[];
  /** Keys the plugin wrote through `ctx.state.set`. */
  stateWrites: string[];
  signal: AbortSignal;
}

/** Resolves when `signal` aborts (never rejects). */
function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/**
 * A transparent wrapper around the plugin under test: same manifest, same
 * behaviour, plus records and the holds / failures a test asks for.
 */
export class PluginProbe implements RunnerPlugin {
  readonly manifest: RunnerPlugin['manifest'];
  readonly invocations: Invocation[] = [];
  /** Deliveries currently held by `holdDeliveries`. */
  heldDeliveries = 0;
  /** Runs before the plugin in every invocation (tests use `ctx.state` through it). */
  before: ((ctx: RunContext) => Promise<void>) | undefined;
  private nextGate: Promise<void> | undefined;
  private deliveryGate: Promise<void> | undefined;
  private nextFailure: 'report' | 'throw' | undefined;
  private listeners: Array<() => void> = [];

  constructor(readonly inner: RunnerPlugin) {
    this.manifest = inner.manifest;
  }

  /** Holds the next invocation before the plugin starts, until the returned release is called or the run's signal aborts. */
  holdNextInvocation(): () => void {
    const gate = deferred();
    this.nextGate = gate.promise;
    return () => gate.resolve();
  }

  /** Holds every `delivery.message` until the returned release is called or the run's signal aborts. */
  holdDeliveries(): () => void {
    const gate = deferred();
    this.deliveryGate = gate.promise;
    return () => {
      this.deliveryGate = undefined;
      gate.resolve();
    };
  }

  /** The next invocation fails without calling the plugin: it reports `{ outcome: 'failed' }`, or throws. */
  failNextInvocation(how: 'report' | 'throw'): void {
    this.nextFailure = how;
  }

  /** Resolves once `check()` holds, re-checked whenever the probe records something; rejects after `timeoutMs`. */
  async waitFor(check: () => boolean, what: string, timeoutMs = DEADLINE_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what} not seen within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves once `n` invocations have started. */
  waitForInvocations(n: number): Promise<void> {
    return this.waitFor(() => this.invocations.length >= n, `${n} invocation(s) of the plugin`);
  }

  /** Invocations of one run. */
  of(runId: string): Invocation[] {
    return this.invocations.filter((i) => i.runId === runId);
  }

  async run(ctx: RunContext): Promise<RunResult> {
    const inv: Invocation = {
      runId: ctx.run.id,
      attempt: ctx.run.attempt,
      inputs: ctx.inputs.map((m) => m.seq),
      pulled: [],
      stateWrites: [],
      signal: ctx.stop.signal,
    };
    this.invocations.push(inv);
    this.notify();
    const gate = this.nextGate;
    this.nextGate = undefined;
    if (gate) await Promise.race([gate, aborted(ctx.stop.signal)]);
    const failure = this.nextFailure;
    this.nextFailure = undefined;
    if (failure === 'throw') throw new Error('contract probe: injected plugin crash');
    if (failure === 'report') return { outcome: 'failed', reason: 'contract probe: reported failure' };
    await this.before?.(ctx);
    const wrapped: RunContext = {
      ...ctx,
      steering: {
        pull: async (mode) => {
          const got = await ctx.steering.pull(mode);
          inv.pulled.push(...got.map((m) => m.seq));
          return got;
        },
      },
      state: {
        get: (key) => ctx.state.get(key),
        set: (key, value) => {
          inv.stateWrites.push(key);
          return ctx.state.set(key, value);
        },
      },
      delivery: {
        message: async (text) => {
          const held = this.deliveryGate;
          if (held) {
            this.heldDeliveries++;
            this.notify();
            await Promise.race([held, aborted(ctx.stop.signal)]);
            this.heldDeliveries--;
          }
          return ctx.delivery.message(text);
        },
        delta: (text) => ctx.delivery.delta(text),
        typing: () => ctx.delivery.typing(),
      },
    };
    return this.inner.run(wrapped);
  }

  private notify(): void {
    for (const l of this.listeners.splice(0)) l();
  }
}

/** The text of the last user message of a chat-completions request body. */
function lastUserText(body: { messages?: Array<{ role: string; content: unknown }> }): string {
  const user = (body.messages ?? []).filter((m) => m.role === 'user').at(-1);
  if (!user) return '';
  if (typeof user.content === 'string') return user.content;
  return JSON.stringify(user.content);
}

/** The fake model's default: a short text answer naming the message it answers. */
const answerLastUser = (req: { messages?: Array<{ role: string; content: unknown }> }): FakeTurn => ({ text: `re: ${lastUserText(req)}` });

const runIdOf = (r: IngestResult): string => {
  expect(r.kind, JSON.stringify(r)).toBe('new-run');
  return (r as Extract<IngestResult, { kind: 'new-run' }>).runId;
};

/** Options of `runnerPluginContract`. */
export interface RunnerContractOptions {
  /** Names the suite: `runner plugin contract: <name>`. */
  name: string;
  /** A plugin module's definition: each test validates `config` with its schema and calls its `create` (model settings point at the fake server). Give this or `makePlugin`. */
  definition?: RunnerPluginDefinition;
  /** The plugin's settings (as under `agents.<id>`), validated by the definition's schema. Default `{}`. */
  config?: unknown;
  /** Creates the plugin under test; called once per test. Give this or `definition`. */
  makePlugin?(env: RunnerContractEnv): RunnerPlugin | Promise<RunnerPlugin>;
  /** The Redis the suite runs on. Default: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
  redisUrl?: string;
}

/** Registers the contract suite for one runner plugin (call it at the top level of a vitest test file). */
// biome-ignore lint/complexity/noExcessiveLinesPerFunction: a contract suite: one describe whose tests share the harness its hooks set up; its length is the list of tests
export function runnerPluginContract({ name, definition, config, makePlugin, redisUrl }: RunnerContractOptions): void {
  if (!definition === !makePlugin) throw new Error('runnerPluginContract: give either `definition` or `makePlugin`');
  const make = async (env: RunnerContractEnv): Promise<RunnerPlugin> => {
    if (makePlugin) return makePlugin(env);
    const model: ModelSettings = {
      provider: 'openai-compatible',
      name: 'contract-model',
      baseURL: env.modelBaseURL,
      apiKey: 'contract-key',
      contextWindow: 128_000,
      outputReserve: 4096,
    };
    const settings = definition!.configSchema.parse(config ?? {});
    const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
    return definition!.create(settings, { logger, model, createModel: (s) => createModel(s ?? model) });
  };
  // biome-ignore lint/complexity/noExcessiveLinesPerFunction: a contract suite: one describe whose tests share the harness its hooks set up; its length is the list of tests
  describe(`runner plugin contract: ${name}`, () => {
    let fake: FakeOpenAIServer;
    let plugin: RunnerPlugin;
    let probe: PluginProbe;
    let h: RunnerHarness | undefined;
    let dispatch: Dispatch;
    let ingestService: IngestService;
    let updates = 0;

    beforeEach(async () => {
      fake = await startFakeOpenAI();
      fake.script(answerLastUser);
      plugin = await make({ modelBaseURL: fake.url, fake });
      probe = new PluginProbe(plugin);
      h = await RunnerHarness.start({ plugin: probe, ...(redisUrl && { redisUrl }) });
      const { config } = h.ctx;
      // The host routes by what this plugin declares (the harness's own dispatch assumes steering).
      dispatch = new Dispatch({
        client: h.ctx.redis,
        prefix: h.prefix,
        dedupeTtlSeconds: config.dispatch.dedupeTtlSeconds,
        steeringCap: config.dispatch.steeringCap,
        defaultPolicy: config.dispatch.defaultPolicy,
        steeringCapable: plugin.manifest.capabilities.steering,
        maxMessageChars: config.dispatch.maxMessageChars,
        leaseMs: config.runs.leaseMs,
      });
      ingestService = new IngestService(dispatch, h.queue);
    });
    afterEach(async () => {
      await h?.close();
      h = undefined;
      await fake.close();
    });

    const ingest = (text: string) =>
      ingestService.ingest({ conversationId: CID, updateKey: `telegram:contract-${++updates}`, sender: { id: 'u1', name: 'Ann' }, text });
    const harness = () => h!;

    describe('manifest', () => {
      it('names the plugin and its version and declares steering, and every other capability, as a boolean', () => {
        const m = plugin.manifest;
        expect(typeof m.name).toBe('string');
        expect(m.name.trim()).not.toBe('');
        expect(typeof m.version).toBe('string');
        expect(m.version.trim()).not.toBe('');
        expect(typeof m.capabilities.steering).toBe('boolean');
        for (const v of Object.values(m.capabilities)) expect(typeof v).toBe('boolean');
      });
    });

    describe('a message', () => {
      it('gets exactly one reply and its run ends completed', async () => {
        const first = await ingest('hello contract');
        const runId = runIdOf(first);
        expect((await harness().runEnded(runId)).outcome).toBe('completed');
        await harness().idle();

        expect(harness().outbound.sent).toHaveLength(1);
        expect(harness().outbound.sent[0]!.conversationId).toBe(CID);
        expect(probe.invocations.map((i) => ({ runId: i.runId, attempt: i.attempt, inputs: i.inputs }))).toEqual([{ runId, attempt: 1, inputs: [first.seq] }]);
        expect((await harness().entries('run.started')).map((e) => e.run)).toEqual([runId]);
        expect(await dispatch.status(CID)).toMatchObject({ pendingDepth: 0, steeringDepth: 0 });
      });
    });

    describe('a message that arrives mid-run', () => {
      // One test, two contracts: the manifest (known only once the plugin is made) decides which one applies.
      it('is steered into the same run (steering capability), else waits in pending for one successor run (collect)', async () => {
        const release = probe.holdNextInvocation();
        const first = await ingest('first question');
        const runId = runIdOf(first);
        await probe.waitForInvocations(1); // acquired and invoked: the run is mid-run

        if (plugin.manifest.capabilities.steering) {
          const second = await ingest('second question, sent mid-run');
          expect(second).toMatchObject({ kind: 'steered', runId });
          release();
          expect((await harness().runEnded(runId)).outcome).toBe('completed');
          await harness().idle();

          // One run took both messages: each reached the plugin exactly once, as input or through a pull.
          expect((await harness().entries('run.started')).map((e) => e.run)).toEqual([runId]);
          const seen = probe.of(runId).flatMap((i) => [...i.inputs, ...i.pulled]);
          expect(seen.sort((a, b) => a - b)).toEqual([first.seq, second.seq]);
          expect(probe.invocations.every((i) => i.runId === runId)).toBe(true);
          expect((await harness().entries('steering.injected')).flatMap((e) => (e.run === runId ? e.seqs : []))).toEqual([second.seq]);
          expect(harness().outbound.sent.length).toBeGreaterThanOrEqual(1);
          // A plugin that talks to the model answers the steered message in a later request of the same run.
          if (fake.requests.length > 0) expect(JSON.stringify(fake.requests.at(-1)!.body.messages)).toContain('second question, sent mid-run');
        } else {
          const second = await ingest('second question');
          const third = await ingest('third question');
          expect(second).toMatchObject({ kind: 'pending', runId, reason: 'policy' });
          expect(third).toMatchObject({ kind: 'pending', runId, reason: 'policy' });
          expect(await dispatch.status(CID)).toMatchObject({ effectivePolicy: 'collect', pendingDepth: 2, steeringDepth: 0 });
          release();

          const started = await waitFor(
            async () => {
              const s = await harness().entries('run.started');
              return s.length >= 2 && s;
            },
            DEADLINE_MS,
            'successor run started',
          );
          const successor = started[1]!;
          expect(successor.run).not.toBe(runId);
          expect(successor.inputs).toEqual([second.seq, third.seq]);
          expect((await harness().runEnded(runId)).outcome).toBe('completed');
          expect((await harness().runEnded(successor.run)).outcome).toBe('completed');
          await harness().idle();

          expect(probe.invocations.map((i) => ({ runId: i.runId, inputs: i.inputs, pulled: i.pulled }))).toEqual([
            { runId, inputs: [first.seq], pulled: [] },
            { runId: successor.run, inputs: [second.seq, third.seq], pulled: [] },
          ]);
          expect(await harness().entries('run.started')).toHaveLength(2);
          expect(harness().outbound.sent).toHaveLength(2); // one reply per run
        }
        expect(await dispatch.status(CID)).toMatchObject({ activeRunId: undefined, pendingDepth: 0, steeringDepth: 0 });
      });
    });

    describe('a stop request', () => {
      it('ends a run whose plugin is working (model call or delivery in flight) stopped, within a deadline, with no successor', async () => {
        fake.script(() => ({ text: 'never sent', delayMs: 60_000 })); // a model call hangs until aborted
        const releaseDeliveries = probe.holdDeliveries();
        const runId = runIdOf(await ingest('a long task'));
        await waitFor(() => fake.requests.length > 0 || probe.heldDeliveries > 0, DEADLINE_MS, 'a model request or a delivery of the plugin');

        const stop = await dispatch.requestStop(harness().source(), 'stop');
        expect(stop).toMatchObject({ kind: 'requested', runId, stop: 'stop' });
        expect((await harness().runEnded(runId, STOP_DEADLINE_MS)).outcome).toBe('stopped');
        releaseDeliveries();
        await harness().idle();
        // Every model call of the stopped run was cut off, not left running.
        await waitFor(() => fake.requests.every((r) => r.aborted === true), STOP_DEADLINE_MS, 'model requests aborted');
        expect(probe.invocations[0]!.signal.aborted).toBe(true);
        expect((await harness().entries('run.started')).map((e) => e.run)).toEqual([runId]);

        fake.script(answerLastUser);
        const sentBefore = harness().outbound.sent.length;
        const next = runIdOf(await ingest('something else'));
        expect((await harness().runEnded(next)).outcome).toBe('completed');
        await harness().idle();
        expect(harness().outbound.sent).toHaveLength(sentBefore + 1);
      });

      it('leaves a plugin invoked after the stop nothing to do: it returns and sends nothing', async () => {
        probe.holdNextInvocation(); // never released: the stop's abort lets the plugin start
        const runId = runIdOf(await ingest('a task stopped at once'));
        await probe.waitForInvocations(1);

        expect(await dispatch.requestStop(harness().source(), 'stop')).toMatchObject({ kind: 'requested', runId });
        expect((await harness().runEnded(runId, STOP_DEADLINE_MS)).outcome).toBe('stopped');
        await harness().idle();
        expect(harness().outbound.sent).toEqual([]);
        expect(fake.requests).toEqual([]);
      });
    });

    describe('a failing run', () => {
      /** Waits for the follow-up of `failed` (the next run, with the same inputs) to end completed; returns its invocations. */
      const followUpAnswers = async (failed: string, seq: number) => {
        const started = await waitFor(
          async () => (await harness().entries('run.started')).find((e) => e.run !== failed),
          DEADLINE_MS,
          `the follow-up run of ${failed}`,
        );
        expect(started.inputs).toEqual([seq]);
        expect((await harness().runEnded(started.run)).outcome).toBe('completed');
        await harness().idle();
        return probe.of(started.run);
      };

      it('ends failed when the plugin reports failure, and a follow-up run answers its message, once', async () => {
        probe.failNextInvocation('report');
        const message = await ingest('this one fails');
        const failed = runIdOf(message);
        const ended = await harness().runEnded(failed);
        expect(ended).toMatchObject({ outcome: 'failed', reason: 'contract probe: reported failure' });
        expect(await followUpAnswers(failed, message.seq)).toHaveLength(1);
        // The plugin owns its failure message and the runtime adds none: the person gets the follow-up's reply only.
        expect(harness().outbound.sent).toHaveLength(1);
        expect((await harness().entries('run.started')).map((e) => e.run)).toHaveLength(2);
      });

      it('ends failed when the plugin throws, and a follow-up run answers its message, with no failure message', async () => {
        probe.failNextInvocation('throw');
        const message = await ingest('this one crashes');
        const failed = runIdOf(message);
        expect(await harness().runEnded(failed)).toMatchObject({ outcome: 'failed', reason: 'runner plugin error' });
        expect(await followUpAnswers(failed, message.seq)).toHaveLength(1);
        expect(harness().outbound.sent).toHaveLength(1);
        expect(harness().outbound.texts).not.toContain(DEFAULT_FAILURE_MESSAGE);
      });
    });

    describe('conversation state', () => {
      it('is readable in a later run when set through ctx.state (state capability), else left unwritten by the plugin', async () => {
        const KEY = 'contract.probe-note';
        const reads: unknown[] = [];
        if (plugin.manifest.capabilities.state) {
          probe.before = async (ctx) => {
            reads.push(await ctx.state.get(KEY));
            if (reads.length === 1) await ctx.state.set(KEY, { setBy: ctx.run.id, n: 1 });
          };
        }
        const firstRun = runIdOf(await ingest('remember this'));
        expect((await harness().runEnded(firstRun)).outcome).toBe('completed');
        await harness().idle();
        const secondRun = runIdOf(await ingest('what did I say?'));
        expect((await harness().runEnded(secondRun)).outcome).toBe('completed');
        await harness().idle();

        if (plugin.manifest.capabilities.state) {
          expect(reads).toEqual([undefined, { setBy: firstRun, n: 1 }]);
        } else {
          expect(probe.invocations.flatMap((i) => i.stateWrites)).toEqual([]);
        }
      });
    });
  });
}
