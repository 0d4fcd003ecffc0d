/**
 * End-to-end harness for runner tests: host side (Dispatch + RunQueue +
 * IngestService) and a runner (`startRunner`) on one random key prefix and
 * one BullMQ queue per test, a recording channel outbound, a fetch tap for
 * the model's HTTP traffic, and teardown that leaves nothing behind.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModel } from 'ai';
import { afterEach, beforeEach } from 'vitest';
import { z } from 'zod';
import { IngestService } from '../../host/ingest.js';
import { dispatchFromConfig } from '../../host/main.js';
import type { AgentTool } from '../../plugins/local-agent/index.js';
import type { ChannelOutbound } from '../../runner/delivery.js';
import { startRunner, type StartedRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { AppContext } from '../../src/app-context.js';
import { conversationKeys } from '../../src/keys.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import type { IncomingMessage, IngestResult, InputPolicy } from '../../src/protocol/types.js';
import type { RecordEntry, SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import type { RedisClient } from '../../src/redis.js';
import { RunQueue } from '../../src/run-queue.js';
import { startFakeOpenAI, type FakeOpenAIServer } from '../fakes/openai-server.js';
import { closeTestContext, createTestContext } from '../fixtures/runner-context.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

/** The conversation the tests talk in (the recording outbound serves `telegram:`). */
export const CID = 'telegram:42';

import { waitFor } from '../helpers/wait.js';

export { waitFor };

/** The fake model server and the harness of the running test (see `perTestModel`). */
export interface PerTest {
  fake: FakeOpenAIServer;
  /** Set by the test when it starts one; closed after the test. */
  h: RunnerHarness | undefined;
}

/**
 * Registers hooks for the calling test file: a fresh fake OpenAI server
 * before each test; after it, the harness the test put in `h` (if any) and
 * then the server are closed.
 */
export function perTestModel(): PerTest {
  const t = { h: undefined } as PerTest;
  beforeEach(async () => {
    t.fake = await startFakeOpenAI();
  });
  afterEach(async () => {
    await t.h?.close();
    t.h = undefined;
    await t.fake.close();
  });
  return t;
}

/** A resolvable promise (a gate the test opens). */
export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
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

/** One message the recording outbound was asked to send. */
export interface SentMessage {
  conversationId: string;
  text: string;
}

/** A channel outbound that records every sent text. */
export class RecordingOutbound implements ChannelOutbound {
  readonly channelId = 'telegram';
  readonly maxMessageChars = 4096;
  readonly sent: SentMessage[] = [];
  private waiters: Array<() => void> = [];

  async send(conversationId: string, text: string): Promise<{ messageId: string }> {
    this.sent.push({ conversationId, text });
    for (const w of this.waiters.splice(0)) w();
    return { messageId: `m${this.sent.length}` };
  }

  /** The sent texts, in order. */
  get texts(): string[] {
    return this.sent.map((m) => m.text);
  }

  /** Resolves with the sent messages once at least `n` were sent; rejects after `timeoutMs`. */
  async waitForMessages(n: number, timeoutMs = 10_000): Promise<SentMessage[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.sent.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`expected ${n} sent messages within ${timeoutMs} ms, got ${JSON.stringify(this.texts)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return [...this.sent];
  }
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

/** Options of `RunnerHarness.start`. */
export interface HarnessOptions {
  /** The runner plugin; without it no runner is started (start one with `startRunner`). */
  plugin?: RunnerPlugin;
}

/** Host parts + runner on a private prefix and queue. */
export class RunnerHarness {
  readonly outbound = new RecordingOutbound();
  readonly queueName: string;
  readonly dispatch: Dispatch;
  readonly queue: RunQueue;
  readonly ingestService: IngestService;
  readonly runners: StartedRunner[] = [];
  private updates = 0;
  private readonly queueConn: RedisClient;

  private constructor(
    readonly ctx: AppContext,
    readonly prefix: string,
  ) {
    const { config } = ctx;
    this.queueName = config.runs.queueName;
    // The prefix comes from the config the test context was built with.
    this.dispatch = dispatchFromConfig(config, ctx.redis);
    this.queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-test-queue' });
    this.queue = new RunQueue({ connection: this.queueConn, name: this.queueName });
    this.ingestService = new IngestService(this.dispatch, this.queue);
  }

  /** Creates the context (lease 1500 ms, heartbeat 300 ms) and starts a runner when `plugin` is given. */
  static async start(opts: HarnessOptions = {}): Promise<RunnerHarness> {
    const prefix = testPrefix();
    const h = new RunnerHarness(createTestContext({ redisUrl: redisUrl(), prefix }), prefix);
    if (opts.plugin) await h.startRunner(opts.plugin);
    return h;
  }

  /** Starts a runner in this process (BullMQ lock 2000 ms, stalled check every 500 ms). */
  async startRunner(plugin: RunnerPlugin): Promise<StartedRunner> {
    const runner = await startRunner(this.ctx, {
      plugin,
      resolveOutbound: (cid) => (cid.startsWith('telegram:') ? this.outbound : undefined),
      lockDurationMs: 2000,
      stalledIntervalMs: 500,
    });
    this.runners.push(runner);
    return runner;
  }

  /** Ingests a text message from user u1 into `CID` (a fresh update key each call). */
  ingest(text: string, opts: { policy?: InputPolicy; conversationId?: string } = {}): Promise<IngestResult> {
    const message: IncomingMessage = {
      conversationId: opts.conversationId ?? CID,
      updateKey: `telegram:${++this.updates}`,
      sender: { id: 'u1', name: 'Ann' },
      text,
    };
    return this.ingestService.ingest(message, opts.policy ? { policy: opts.policy } : {});
  }

  /** A control command source with a fresh update key. */
  source(conversationId = CID) {
    return { conversationId, updateKey: `telegram:cmd-${++this.updates}`, sender: { id: 'u1' } };
  }

  /** Every entry of the conversation record. */
  record(conversationId = CID): Promise<SeqEntry[]> {
    return readRange(this.ctx.redis, conversationKeys(this.prefix, conversationId).log);
  }

  /** Entries of one kind. */
  async entries<K extends RecordEntry['kind']>(kind: K, conversationId = CID): Promise<Array<SeqEntry<Extract<RecordEntry, { kind: K }>>>> {
    return (await this.record(conversationId)).filter((e): e is SeqEntry<Extract<RecordEntry, { kind: K }>> => e.kind === kind);
  }

  /** Waits for the `run.ended` entry of `runId`. */
  runEnded(runId: string, timeoutMs = 10_000, conversationId = CID) {
    return waitFor(async () => (await this.entries('run.ended', conversationId)).find((e) => e.run === runId), timeoutMs, `run.ended of ${runId}`);
  }

  /** Waits until no run is active in the conversation. */
  idle(timeoutMs = 10_000, conversationId = CID): Promise<true> {
    return waitFor(async () => (await this.dispatch.status(conversationId)).activeRunId === undefined || undefined, timeoutMs, 'conversation idle');
  }

  /** Stops the runners, removes the queue and every key of the test. */
  async close(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.close(1000)));
    await this.queue.queue.obliterate({ force: true });
    await this.queue.close();
    this.queueConn.disconnect();
    await cleanupPrefix(this.ctx.redis, this.prefix);
    await cleanupPrefix(this.ctx.redis, `{sb-bull}:${this.queueName}`);
    await closeTestContext(this.ctx);
  }
}
