/**
 * End-to-end harness for runner plugins: the host side (Dispatch + RunQueue +
 * IngestService) and a runner (`startRunner`) on one random key prefix and
 * one BullMQ queue per harness, a recording channel outbound, and teardown
 * that leaves nothing behind. No vitest imports.
 */

import type { ChannelOutbound, SendOptions } from 'steerbot/channel';
import type { IncomingMessage, IngestResult, InputPolicy, RecordEntry, RedisClient, SeqEntry } from 'steerbot/plugin';
import type { RunnerPlugin } from 'steerbot/runner';
import { runnerFeatures } from '../app/features/index.js';
import { IngestService } from '../host/ingest.js';
import { dispatchFromConfig } from '../host/main.js';
import { type StartedRunner, startRunner } from '../runner/main.js';
import type { AppContext } from '../src/app-context.js';
import type { Dispatch } from '../src/protocol/dispatch.js';
import { bullPrefixFor, RunQueue } from '../src/protocol/run-queue.js';
import { readRange } from '../src/record/read.js';
import { conversationKeys } from '../src/redis/keys.js';
import { cleanupPrefix, defaultRedisUrl, testPrefix } from './redis.js';
import { closeTestContext, createTestContext } from './runner-context.js';
import { waitFor } from './wait.js';

/** The conversation the harness talks in (the recording outbound serves `telegram:`). */
export const CID = 'telegram:42';

/** A resolvable promise (a gate the test opens). */
export function deferred<T = void>(): { promise: Promise<T>; resolve(v: T): void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** One message the recording outbound was asked to send. */
export interface SentMessage {
  conversationId: string;
  text: string;
  /** The buttons under it (an approval request's, a question's options), when it had any. */
  buttons?: Array<{ label: string; command: string }>;
}

/** A channel outbound that records every sent text. */
export class RecordingOutbound implements ChannelOutbound {
  readonly channelId = 'telegram';
  readonly maxMessageChars = 4096;
  readonly sent: SentMessage[] = [];
  private waiters: Array<() => void> = [];

  async send(conversationId: string, text: string, opts?: SendOptions): Promise<{ messageId: string }> {
    this.sent.push({ conversationId, text, ...(opts?.buttons?.length && { buttons: opts.buttons.map((b) => ({ ...b })) }) });
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

/** Options of `RunnerHarness.start`. */
export interface HarnessOptions {
  /** The runner plugin; without it no runner is started (start one with `startRunner`). */
  plugin?: RunnerPlugin;
  /** The Redis to run on. Default: `REDIS_URL`, else `redis://127.0.0.1:6379`. */
  redisUrl?: string;
  /** Follow-up runs a failed run's unanswered messages get (`runs.followUpsOnFailure`); 0: the failure is told at once. Default 2. */
  followUpsOnFailure?: number;
}

/** A runner `RunnerHarness.startRunner` started. */
export interface HarnessRunner {
  /** The runner's owner id, as run records name it. */
  readonly owner: string;
  /** Stops with a grace period; reports how many runs were aborted in flight. */
  close(graceMs?: number): Promise<{ abortedInFlight: number }>;
}

/** Host parts + runner on a private prefix and queue. */
export class RunnerHarness {
  /** Where replies to `telegram:` conversations go. */
  readonly outbound = new RecordingOutbound();
  /** The BullMQ queue of the test. */
  readonly queueName: string;
  /** The key prefix of the test. */
  readonly prefix: string;
  /** The harness's Redis command connection (read keys with it; closed by `close()`). */
  readonly redis: RedisClient;
  /** @internal */
  readonly ctx: AppContext;
  /** @internal */
  readonly dispatch: Dispatch;
  /** @internal */
  readonly queue: RunQueue;
  /** @internal */
  readonly ingestService: IngestService;
  /** @internal */
  readonly runners: StartedRunner[] = [];
  private updates = 0;
  private readonly queueConn: RedisClient;

  private constructor(ctx: AppContext, prefix: string, steeringCapable: boolean) {
    this.ctx = ctx;
    this.prefix = prefix;
    this.redis = ctx.redis;
    const { config } = ctx;
    this.queueName = config.runs.queueName;
    // The prefix comes from the config the test context was built with.
    this.dispatch = dispatchFromConfig(config, ctx.redis, steeringCapable);
    this.queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-test-queue' });
    this.queue = new RunQueue({ connection: this.queueConn, name: this.queueName, bullPrefix: bullPrefixFor(prefix) });
    this.ingestService = new IngestService(this.dispatch, this.queue);
  }

  /** Creates the context (lease 1500 ms, heartbeat 300 ms) and starts a runner when `plugin` is given. */
  static async start(opts: HarnessOptions = {}): Promise<RunnerHarness> {
    const prefix = testPrefix();
    // The host routes by what the plugin declares; without one (a runner started later), as a steering runner.
    const steering = opts.plugin?.manifest.capabilities.steering ?? true;
    const settings = {
      redisUrl: opts.redisUrl ?? defaultRedisUrl(),
      prefix,
      ...(opts.followUpsOnFailure !== undefined && { followUpsOnFailure: opts.followUpsOnFailure }),
    };
    const h = new RunnerHarness(createTestContext(settings), prefix, steering);
    if (opts.plugin) await h.startRunner(opts.plugin);
    return h;
  }

  /** Starts a runner in this process (BullMQ lock 2000 ms, stalled check every 500 ms). */
  async startRunner(plugin: RunnerPlugin): Promise<HarnessRunner> {
    const runner = await startRunner(this.ctx, {
      plugin,
      resolveOutbound: (cid) => (cid.startsWith('telegram:') ? this.outbound : undefined),
      lockDurationMs: 2000,
      stalledIntervalMs: 500,
      features: runnerFeatures(),
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
    await cleanupPrefix(this.ctx.redis, bullPrefixFor(this.prefix));
    await closeTestContext(this.ctx);
  }
}
