/**
 * Fixture for protocol tests against a real Redis: one client per test file,
 * a fresh key prefix per test (deleted after it), extra connections on demand,
 * and small readers for the keys the scripts write.
 */
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { type ChannelHostDeps, createChannelHost } from '../../host/receive.js';
import type { ChannelHost, ChannelOutbound } from '../../src/channel.js';
import { ConversationState, Dispatch, type IncomingMessage, type IngestResult, type ProtocolOptions, Runs } from '../../src/protocol/index.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import { type ConversationKeys, controlChannel, conversationKeys } from '../../src/redis/keys.js';
import { cleanupPrefix, redisUrl, testPrefix } from './redis.js';

/** The conversation most tests use. */
export const CID = 'telegram:42';

type Overrides = Omit<Partial<ProtocolOptions>, 'client' | 'prefix'>;

/** Messages published on a control channel, with a deadline-bound wait. */
export class ControlSubscription {
  readonly messages: unknown[] = [];
  private waiters: Array<() => void> = [];

  constructor(
    readonly client: Redis,
    readonly channel: string,
  ) {
    client.on('message', (ch: string, msg: string) => {
      if (ch !== channel) return;
      this.messages.push(JSON.parse(msg));
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** Resolves with the first message matching `match`; rejects after `timeoutMs`. */
  async waitFor(match: (m: unknown) => boolean = () => true, timeoutMs = 2000): Promise<unknown> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(match);
      if (found !== undefined) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching message on ${this.channel} within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

export class ProtocolFixture {
  /** Key prefix of the current test. */
  prefix = '';
  private main: Redis | undefined;
  private extra: Redis[] = [];

  /** The file's main connection. */
  get redis(): Redis {
    if (!this.main) throw new Error('fixture used outside a test');
    return this.main;
  }

  /** @internal */
  async open(): Promise<void> {
    this.main = new Redis(redisUrl());
  }

  /** @internal */
  async close(): Promise<void> {
    await this.main?.quit();
  }

  /** @internal */
  async cleanup(): Promise<void> {
    await Promise.all(this.extra.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
    await cleanupPrefix(this.redis, this.prefix);
  }

  /** A new connection, closed after the test. */
  connection(): Redis {
    const c = new Redis(redisUrl());
    this.extra.push(c);
    return c;
  }

  /** `n` new connections. */
  connections(n: number): Redis[] {
    return Array.from({ length: n }, () => this.connection());
  }

  options(overrides: Overrides = {}, client: Redis = this.redis): ProtocolOptions {
    return { client, prefix: this.prefix, ...overrides };
  }

  dispatch(overrides: Overrides = {}, client: Redis = this.redis): Dispatch {
    return new Dispatch(this.options(overrides, client));
  }

  /** The real channel host on this fixture's Redis, with no HTTP routes and no features unless `more` has them, answering through `outbound`. */
  channelHost(dispatch: Dispatch, outbound: ChannelOutbound, more: Pick<Partial<ChannelHostDeps>, 'enqueue' | 'features'> = {}): ChannelHost {
    return createChannelHost({
      routes: {
        add() {
          throw new Error('no HTTP routes in this test');
        },
      },
      redis: this.redis,
      prefix: this.prefix,
      logger: pino({ level: 'silent' }),
      dispatch,
      ingest: dispatch,
      enqueue: async () => undefined,
      outbound: () => outbound,
      features: [],
      ...more,
    });
  }

  runs(overrides: Overrides = {}, client: Redis = this.redis): Runs {
    return new Runs(this.options(overrides, client));
  }

  state(overrides: Overrides = {}, client: Redis = this.redis): ConversationState {
    return new ConversationState(this.options(overrides, client));
  }

  keys(conversationId = CID): ConversationKeys {
    return conversationKeys(this.prefix, conversationId);
  }

  /** A valid message numbered `n` (update key `telegram:<n>`, text `message <n>`). */
  message(n: number | string, overrides: Partial<IncomingMessage> = {}): IncomingMessage {
    return { conversationId: CID, updateKey: `telegram:${n}`, sender: { id: 'u1', name: 'Ann' }, text: `message ${n}`, ...overrides };
  }

  /** A control command source numbered `n`. */
  source(n: number | string, conversationId = CID) {
    return { conversationId, updateKey: `telegram:cmd-${n}`, sender: { id: 'u1' } };
  }

  /** Every entry of the conversation record, validated. */
  record(conversationId = CID): Promise<SeqEntry[]> {
    return readRange(this.redis, this.keys(conversationId).log);
  }

  /** Kinds of the record's entries, in order. */
  async kinds(conversationId = CID): Promise<string[]> {
    return (await this.record(conversationId)).map((e) => e.kind);
  }

  async recordLength(conversationId = CID): Promise<number> {
    return this.redis.xlen(this.keys(conversationId).log);
  }

  /** A list of seqs (steering or pending) as numbers. */
  async seqs(key: string): Promise<number[]> {
    return (await this.redis.lrange(key, 0, -1)).map(Number);
  }

  steering(runId: string, conversationId = CID): Promise<number[]> {
    return this.seqs(this.keys(conversationId).steer(runId));
  }

  pending(conversationId = CID): Promise<number[]> {
    return this.seqs(this.keys(conversationId).pending);
  }

  /** The run record hash. */
  async runRecord(runId: string, conversationId = CID): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys(conversationId).run(runId));
  }

  /** Seqs in a run's `inputs` key. */
  async inputs(runId: string, conversationId = CID): Promise<number[]> {
    const csv = await this.redis.get(this.keys(conversationId).inputs(runId));
    return csv
      ? csv
          .split(',')
          .filter((s) => s !== '')
          .map(Number)
      : [];
  }

  /** Every key under the test prefix, sorted. */
  async allKeys(): Promise<string[]> {
    const out: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}:*`, 'COUNT', 500);
      cursor = next;
      out.push(...keys);
    } while (cursor !== '0');
    return out.sort();
  }

  /** Every key under the prefix with its full contents (TTLs excluded): for "nothing written" checks. */
  async snapshot(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const key of await this.allKeys()) {
      const type = await this.redis.type(key);
      switch (type) {
        case 'string':
          out[key] = await this.redis.get(key);
          break;
        case 'hash':
          out[key] = await this.redis.hgetall(key);
          break;
        case 'list':
          out[key] = await this.redis.lrange(key, 0, -1);
          break;
        case 'stream':
          out[key] = await this.redis.xrange(key, '-', '+');
          break;
        default:
          out[key] = `<${type}>`;
      }
    }
    return out;
  }

  /** Now on the Redis clock, ms since the epoch. */
  async redisTime(): Promise<number> {
    const [s, us] = await this.redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  /** Subscribes a dedicated connection to the control channel; resolves once subscribed. */
  async subscribeControl(): Promise<ControlSubscription> {
    const sub = this.redis.duplicate();
    this.extra.push(sub);
    const channel = controlChannel(this.prefix);
    const s = new ControlSubscription(sub, channel);
    await sub.subscribe(channel);
    return s;
  }

  /** A conversation with one running run: message `start` ingested and acquired by `worker-1`. */
  async running(overrides: Overrides = {}, conversationId = CID, leaseMs?: number) {
    const dispatch = this.dispatch(overrides);
    const runs = this.runs(overrides);
    const first = expectKind(await dispatch.ingest(this.message(`start-${conversationId}`, { conversationId })), 'new-run');
    const run = await runs.acquire(conversationId, first.runId, 'worker-1', leaseMs);
    return { dispatch, runs, run, runId: first.runId, firstSeq: first.seq };
  }
}

/** Asserts an ingest result's kind and narrows it. */
export function expectKind<K extends IngestResult['kind']>(r: IngestResult, kind: K): Extract<IngestResult, { kind: K }> {
  expect(r.kind, JSON.stringify(r)).toBe(kind);
  return r as Extract<IngestResult, { kind: K }>;
}

/** Registers the per-file connection and per-test prefix hooks; returns the fixture. */
export function useProtocolFixture(): ProtocolFixture {
  const fx = new ProtocolFixture();
  beforeAll(() => fx.open());
  beforeEach(() => {
    fx.prefix = testPrefix();
  });
  afterEach(() => fx.cleanup());
  afterAll(() => fx.close());
  return fx;
}
