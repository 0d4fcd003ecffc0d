import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { createWebhookOutbound } from '../../plugins/webhook/outbound.js';
import { type OutboxRecord, RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound, SendOptions } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { Dispatch, Runs } from '../../src/protocol/index.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const CID = 'fake:1';
const logger = createLogger({ level: 'silent' });

/** An outbound that records sends and edits and fails as scripted. */
class FakeOutbound implements ChannelOutbound {
  readonly channelId = 'fake';
  sent: Array<{ text: string; opts?: SendOptions }> = [];
  edits: Array<{ messageId: string; text: string }> = [];
  /** Errors thrown by the next send calls, in order. */
  sendFailures: Error[] = [];
  /** Called inside `send`, before it succeeds. */
  onSend?: ((text: string, opts?: SendOptions) => Promise<void>) | undefined;
  edit?: NonNullable<ChannelOutbound['edit']>;
  streamEditIntervalMs?: NonNullable<ChannelOutbound['streamEditIntervalMs']>;

  constructor(
    readonly maxMessageChars = 100,
    stream?: { intervalMs: number },
  ) {
    if (stream) {
      this.edit = async (_cid, messageId, text) => void this.edits.push({ messageId, text });
      this.streamEditIntervalMs = () => stream.intervalMs;
    }
  }

  async send(_cid: string, text: string, opts?: SendOptions): Promise<{ messageId: string }> {
    const failure = this.sendFailures.shift();
    if (failure) throw failure;
    await this.onSend?.(text, opts);
    this.sent.push({ text, ...(opts && { opts }) });
    return { messageId: `m${this.sent.length}` };
  }
}

let redis: Redis;
let prefix: string;
beforeAll(() => {
  redis = new Redis(redisUrl());
});
afterAll(async () => {
  await redis.quit();
});
beforeEach(() => {
  prefix = testPrefix();
});
afterEach(async () => {
  await cleanupPrefix(redis, prefix);
});

function delivery(out: ChannelOutbound | undefined, extra: { runId?: string; sleeps?: number[]; outboxTtlSeconds?: number } = {}): RunDelivery {
  return new RunDelivery({
    ...(extra.outboxTtlSeconds !== undefined && { outboxTtlSeconds: extra.outboxTtlSeconds }),
    client: redis,
    prefix,
    conversationId: CID,
    runId: extra.runId ?? 'run1',
    resolve: () => out,
    logger,
    sleep: async (ms) => void extra.sleeps?.push(ms),
  });
}

async function outbox(): Promise<Record<string, OutboxRecord>> {
  const raw = await redis.hgetall(conversationKeys(prefix, CID).outbox);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, JSON.parse(v) as OutboxRecord]));
}

const paragraphs = (n: number, words = 12) => Array.from({ length: n }, (_, i) => Array.from({ length: words }, (_, j) => `p${i}w${j}`).join(' ')).join('\n\n');

describe('RunDelivery', () => {
  describe('a reply over the channel limit', () => {
    it('is sent as chunks within the limit, each under its own delivery key, complete', async () => {
      const out = new FakeOutbound(100);
      const text = paragraphs(5);
      await delivery(out).message(text);

      expect(out.sent.length).toBeGreaterThan(1);
      for (const s of out.sent) expect(s.text.length).toBeLessThanOrEqual(100);
      expect(
        out.sent
          .map((s) => s.text)
          .join(' ')
          .split(/\s+/),
      ).toEqual(text.split(/\s+/));
      expect(out.sent.map((s) => s.opts?.deliveryKey)).toEqual(out.sent.map((_, i) => `run1:${i}`));
      const box = await outbox();
      expect(Object.keys(box).sort()).toEqual(out.sent.map((_, i) => `run1:${i}`).sort());
      expect(Object.values(box).every((r) => r.status === 'acknowledged')).toBe(true);
      expect(box['run1:0']!.messageId).toBe('m1');
    });

    it('numbers the chunks of later messages after the earlier ones', async () => {
      const out = new FakeOutbound(100);
      const d = delivery(out);
      await d.message(paragraphs(2));
      await d.message('short');
      expect(out.sent.at(-1)).toEqual({ text: 'short', opts: { deliveryKey: `run1:${out.sent.length - 1}`, format: 'markdown' } });
    });
  });

  describe('the outbox', () => {
    it('records a message as possibly dispatched before the channel is called', async () => {
      const out = new FakeOutbound();
      const seen: Array<OutboxRecord | undefined> = [];
      out.onSend = async () => void seen.push((await outbox())['run1:0']);
      await delivery(out).message('hello');
      expect(seen).toEqual([{ status: 'possibly-dispatched' }]);
      expect((await outbox())['run1:0']).toEqual({ status: 'acknowledged', messageId: 'm1' });
    });

    it('tells the channel when an earlier attempt may have sent a message, from the time its key was first claimed', async () => {
      // Attempt 1 dies in its send: the platform may have the message, the outbox never hears back.
      const dying = new FakeOutbound();
      dying.onSend = (_text, opts) => {
        dying.sent.push({ text: 'in flight', ...(opts && { opts }) });
        return new Promise<never>(() => undefined);
      };
      void delivery(dying).message('hello');
      await waitFor(() => dying.sent.length === 1, 5000, 'the first send');
      const firstClaim = Number(await redis.zscore(conversationKeys(prefix, CID).outboxIndex, 'run1:0'));

      const out = new FakeOutbound();
      await delivery(out).message('hello');
      expect(dying.sent[0]!.opts?.maybeSentSince).toBeUndefined();
      expect(firstClaim).toBeGreaterThan(0);
      expect(out.sent.map((s) => s.opts?.maybeSentSince)).toEqual([firstClaim]);
      expect((await outbox())['run1:0']).toEqual({ status: 'acknowledged', messageId: 'm1' });
    });

    it('does not say a message may have been sent when the platform refused it', async () => {
      const out = new FakeOutbound();
      out.sendFailures = [new ChannelApiError('Bad Request', { status: 400 })];
      await delivery(out).message('hello');
      expect((await outbox())['run1:0']).toMatchObject({ status: 'not-dispatched' });
      await delivery(out).message('hello');
      expect(out.sent).toHaveLength(1);
      expect(out.sent[0]!.opts?.maybeSentSince).toBeUndefined();
    });

    it('never re-sends an acknowledged chunk when the run is retried, and sends the rest', async () => {
      const out = new FakeOutbound(100);
      const text = paragraphs(4);
      // First attempt: the second chunk is refused, the others go through.
      out.sendFailures = [];
      let calls = 0;
      out.onSend = async () => {
        if (++calls === 2) throw new ChannelApiError('Bad Request', { status: 400 });
      };
      await delivery(out).message(text);
      const firstAttempt = out.sent.map((s) => s.opts?.deliveryKey);
      expect((await outbox())['run1:1']).toMatchObject({ status: 'not-dispatched' });

      out.onSend = undefined;
      out.sent = [];
      await delivery(out).message(text);
      expect(out.sent.map((s) => s.opts?.deliveryKey)).toEqual(['run1:1']);
      expect(firstAttempt).not.toContain('run1:1');
      expect(Object.values(await outbox()).every((r) => r.status === 'acknowledged')).toBe(true);
    });

    it('expires a conversation outbox after its TTL, renewed by every write (claims and acknowledgements)', async () => {
      const key = conversationKeys(prefix, CID).outbox;
      const out = new FakeOutbound();
      const ttlDuringSend: number[] = [];
      out.onSend = async () => void ttlDuringSend.push(await redis.ttl(key));
      await delivery(out, { outboxTtlSeconds: 7200 }).message('first');
      expect(ttlDuringSend[0]).toBeGreaterThan(7100); // set by the claim, before the send
      expect(await redis.ttl(key)).toBeGreaterThan(7100);
      // A record written while the outbox has no TTL (as after it expired mid-send) gets one again.
      await redis.persist(key);
      out.onSend = async () => void (await redis.persist(key));
      await delivery(out, { outboxTtlSeconds: 7200, runId: 'run2' }).message('second');
      expect(await redis.ttl(key)).toBeGreaterThan(7100);
      expect(Object.keys(await outbox()).sort()).toEqual(['run1:0', 'run2:0']);
    });

    it('keeps the outbox 1 day by default', async () => {
      await delivery(new FakeOutbound()).message('hello');
      const ttl = await redis.ttl(conversationKeys(prefix, CID).outbox);
      expect(ttl).toBeGreaterThan(86_400 - 100);
      expect(ttl).toBeLessThanOrEqual(86_400);
    });

    it('records replies when the conversation has no outbound channel', async () => {
      await delivery(undefined).message('nowhere to go');
      expect(await outbox()).toEqual({ 'run1:0': { status: 'not-dispatched' } });
    });
  });

  describe('platform errors', () => {
    it('waits the retry-after of a rate limit and tries again', async () => {
      const out = new FakeOutbound();
      out.sendFailures = [
        new ChannelApiError('Too Many Requests', { status: 429, retryAfterMs: 1234 }),
        new ChannelApiError('Too Many Requests', { status: 429, retryAfterMs: 2000 }),
      ];
      const sleeps: number[] = [];
      await delivery(out, { sleeps }).message('hello');
      expect(sleeps).toEqual([1234, 2000]);
      expect(out.sent.map((s) => s.text)).toEqual(['hello']);
    });

    it('backs off exponentially on 5xx', async () => {
      const out = new FakeOutbound();
      out.sendFailures = [new ChannelApiError('Bad Gateway', { status: 502 }), new ChannelApiError('Bad Gateway', { status: 502 })];
      const sleeps: number[] = [];
      await delivery(out, { sleeps }).message('hello');
      expect(sleeps).toEqual([500, 1000]);
      expect(out.sent).toHaveLength(1);
    });

    it('gives up after a bounded number of attempts without throwing, leaving the chunk not dispatched', async () => {
      const out = new FakeOutbound();
      out.sendFailures = Array.from({ length: 10 }, () => new ChannelApiError('Too Many Requests', { status: 429, retryAfterMs: 10 }));
      const sleeps: number[] = [];
      await delivery(out, { sleeps }).message('hello');
      expect(sleeps).toHaveLength(4);
      expect(out.sent).toHaveLength(0);
      expect((await outbox())['run1:0']).toMatchObject({ status: 'not-dispatched' });
    });

    it('does not retry a request the platform refused (4xx)', async () => {
      const out = new FakeOutbound();
      out.sendFailures = [new ChannelApiError('Forbidden', { status: 403 })];
      const sleeps: number[] = [];
      await delivery(out, { sleeps }).message('hello');
      expect(sleeps).toEqual([]);
      expect(out.sent).toHaveLength(0);
    });
  });

  describe('streaming', () => {
    it('sends the first delta, then edits the same message, and the final message edits it instead of sending again', async () => {
      const out = new FakeOutbound(100, { intervalMs: 0 });
      const d = delivery(out);
      d.delta('Hel');
      d.delta('lo');
      d.delta(' wor');
      await waitFor(() => out.sent.length === 1);
      d.delta('ld');
      await d.message('Hello world!');

      expect(out.sent.map((s) => s.text)).toHaveLength(1);
      expect(out.sent[0]!.text.startsWith('Hel')).toBe(true);
      expect(out.edits.at(-1)).toEqual({ messageId: 'm1', text: 'Hello world!' });
      // Every edit changes what is shown.
      const shown = [out.sent[0]!.text, ...out.edits.map((e) => e.text)];
      for (let i = 1; i < shown.length; i++) expect(shown[i]).not.toBe(shown[i - 1]);
      expect(await outbox()).toEqual({ 'run1:0': { status: 'acknowledged', messageId: 'm1' } });
    });

    it('does not edit more often than the channel interval', async () => {
      const out = new FakeOutbound(100, { intervalMs: 3_600_000 });
      const d = delivery(out);
      d.delta('one');
      await waitFor(() => out.sent.length === 1);
      d.delta(' two');
      d.delta(' three');
      await d.message('one two three');
      // The only edit is the final one: the throttled preview edits never ran.
      expect(out.edits).toEqual([{ messageId: 'm1', text: 'one two three' }]);
    });

    it('skips edits that would not change the text', async () => {
      const out = new FakeOutbound(100, { intervalMs: 0 });
      const d = delivery(out);
      d.delta('Hello');
      await waitFor(() => out.sent.length === 1);
      d.delta('   \n');
      await d.message('Hello');
      expect(out.sent.map((s) => s.text)).toEqual(['Hello']);
      expect(out.edits).toEqual([]);
    });

    it('splits a final text over the limit: the streamed message gets the first chunk, the rest are sent', async () => {
      const out = new FakeOutbound(100, { intervalMs: 0 });
      const d = delivery(out);
      d.delta('p0w0 p0w1');
      await waitFor(() => out.sent.length === 1);
      const text = paragraphs(3);
      await d.message(text);
      expect(out.edits.at(-1)!.text.length).toBeLessThanOrEqual(100);
      const finalTexts = [out.edits.at(-1)!.text, ...out.sent.slice(1).map((s) => s.text)];
      expect(finalTexts.join(' ').split(/\s+/)).toEqual(text.split(/\s+/));
      expect(out.sent.slice(1).map((s) => s.opts?.deliveryKey)).toEqual(finalTexts.slice(1).map((_, i) => `run1:${i + 1}`));
    });

    it('finishes a preview left by an earlier attempt by editing it, not by sending a second message', async () => {
      const out = new FakeOutbound(100, { intervalMs: 3_600_000 });
      const first = delivery(out);
      first.delta('partial ans');
      await waitFor(async () => (await outbox())['run1:0']?.status === 'acknowledged');
      first.close();

      await delivery(out).message('the full answer');
      expect(out.sent.map((s) => s.text)).toEqual(['partial ans']);
      expect(out.edits).toEqual([{ messageId: 'm1', text: 'the full answer' }]);
    });

    it('ignores deltas when the channel cannot edit', async () => {
      const out = new FakeOutbound(100);
      const d = delivery(out);
      d.delta('Hel');
      d.delta('lo');
      await d.message('Hello');
      expect(out.sent.map((s) => s.text)).toEqual(['Hello']);
    });
  });

  it('shows typing until closed', async () => {
    const out = new FakeOutbound();
    let typing = 0;
    const d = new RunDelivery({
      client: redis,
      prefix,
      conversationId: CID,
      runId: 'r',
      resolve: () => ({ ...out, send: out.send.bind(out), typing: async () => void typing++, typingDelayMs: 0 }),
      logger,
      typingIntervalMs: 5,
    });
    d.typing();
    await waitFor(() => typing >= 2);
    d.close();
    const after = typing;
    await d.message('done');
    expect(typing).toBe(after);
  });

  describe('typing only once the run has worked a while', () => {
    // Only the typing timers are faked: nothing here waits on Redis.
    beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] }));
    afterEach(() => void vi.useRealTimers());

    const typingDelivery = (extra: Partial<ChannelOutbound> = {}) => {
      const out = new FakeOutbound();
      const calls = { typing: 0 };
      const d = new RunDelivery({
        client: redis,
        prefix,
        conversationId: CID,
        runId: 'r',
        resolve: () => ({ ...out, send: out.send.bind(out), typing: async () => void calls.typing++, ...extra }),
        logger,
      });
      return { d, calls };
    };

    it('a run answering within the delay (500 ms) never shows typing; a longer one shows it after the delay, refreshed every 4 s', () => {
      const quick = typingDelivery();
      quick.d.typing();
      vi.advanceTimersByTime(499);
      quick.d.close();
      vi.advanceTimersByTime(10_000);
      expect(quick.calls.typing).toBe(0);

      const slow = typingDelivery();
      slow.d.typing();
      vi.advanceTimersByTime(499);
      expect(slow.calls.typing).toBe(0);
      vi.advanceTimersByTime(1);
      expect(slow.calls.typing).toBe(1);
      slow.d.typing();
      vi.advanceTimersByTime(4000);
      expect(slow.calls.typing).toBe(2);
      slow.d.close();
      vi.advanceTimersByTime(10_000);
      expect(slow.calls.typing).toBe(2);
    });

    it("a channel's typingDelayMs 0 (WhatsApp's typing is its read receipt) shows typing as the run starts", () => {
      const { d, calls } = typingDelivery({ typingDelayMs: 0 });
      d.typing();
      expect(calls.typing).toBe(1);
      d.close();
    });
  });
});

describe('RunDelivery › turns anchored on the record', () => {
  /** One attempt of run1 answering the message with seq `anchor`. */
  async function attempt(out: FakeOutbound, anchor: number, text: string): Promise<void> {
    const d = delivery(out);
    d.beginTurn(anchor);
    await d.message(text);
  }

  it('does not resend a reply a dead attempt already delivered for the same message', async () => {
    const out = new FakeOutbound(1000);
    await attempt(out, 5, 'answer to message 5');
    // Attempt 2 of the same run answers the same message again.
    await attempt(out, 5, 'answer to message 5, regenerated');
    expect(out.sent.map((s) => s.text)).toEqual(['answer to message 5']);
    expect(Object.keys(await outbox())).toEqual(['run1:5:0']);
  });

  it('sends the reply to a newer message that a dead attempt had been handed but not answered', async () => {
    const out = new FakeOutbound(1000);
    await attempt(out, 5, 'answer to message 5');
    // Attempt 1 was handed message 9 by finish, then died before replying; attempt 2 answers it.
    await attempt(out, 9, 'answer to message 9');
    expect(out.sent.map((s) => s.text)).toEqual(['answer to message 5', 'answer to message 9']);
    expect(Object.keys(await outbox()).sort()).toEqual(['run1:5:0', 'run1:9:0']);
  });

  it('delivers a recorded answer after a dead attempt sent an approval request in the same turn', async () => {
    const out = new FakeOutbound(1000);
    // Attempt 1 asks for an approval, records its final answer and dies before delivering it.
    const first = delivery(out);
    first.beginTurn(5);
    await first.message('may I run the tool?', { key: 'ap_1' });
    // Attempt 2 finds the answer in the record and delivers it without asking the model again.
    await attempt(out, 5, 'the answer');
    expect(out.sent.map((s) => s.text)).toEqual(['may I run the tool?', 'the answer']);
    expect(Object.keys(await outbox()).sort()).toEqual(['run1:5:0', 'run1:ap_1:0']);
  });
});

describe('RunDelivery › fenced by the run token', () => {
  /** A run acquired by a first worker, a way to take it over, and delivery sinks of the run by token. */
  async function acquiredRun() {
    const runs = new Runs({ client: redis, prefix });
    const first = await new Dispatch({ client: redis, prefix }).ingest({ conversationId: CID, updateKey: 'fake:u1', sender: { id: 'u1' }, text: 'hi' });
    if (first.kind !== 'new-run') throw new Error('expected a new run');
    const dead = await runs.acquire(CID, first.runId, 'worker-a');
    const out = new FakeOutbound(1000);
    return {
      runId: first.runId,
      dead,
      out,
      /** The first worker's lease runs out; another takes the run over. */
      takeOver: async () => {
        await redis.hset(conversationKeys(prefix, CID).run(first.runId), 'lease_until', 1);
        return runs.acquire(CID, first.runId, 'worker-b');
      },
      make: (token: number) =>
        new RunDelivery({ client: redis, prefix, conversationId: CID, runId: first.runId, token, resolve: () => out, logger, sleep: async () => undefined }),
    };
  }

  it('refuses to send for an attempt that lost its run, and sends for the attempt that owns it', async () => {
    const { dead, out, takeOver, make } = await acquiredRun();
    const live = await takeOver();
    await make(dead.token).message('late answer from the dead attempt');
    expect(out.sent).toEqual([]);
    expect(await outbox()).toEqual({});

    await make(live.token).message('answer');
    expect(out.sent.map((s) => s.text)).toEqual(['answer']);
  });

  it('does not let an attempt that lost its run mid-send overwrite the record of the attempt that took it over', async () => {
    const { runId, dead, out, takeOver, make } = await acquiredRun();
    let live: RunDelivery | undefined;
    // The first attempt's send is slow: meanwhile its lease runs out, another attempt takes the run over and delivers.
    out.onSend = async (text) => {
      if (text !== 'slow answer') return;
      out.onSend = undefined;
      live = make((await takeOver()).token);
      await live.message('answer');
    };
    await make(dead.token).message('slow answer');
    expect(live).toBeDefined();
    // Both went out (the platform took both), but the outbox holds the live attempt's message id: its acknowledgement stands.
    expect(out.sent.map((s) => s.text)).toEqual(['answer', 'slow answer']);
    expect(await outbox()).toEqual({ [`${runId}:0`]: { status: 'acknowledged', messageId: 'm1' } });
  });
});

describe('RunDelivery › webhook channel', () => {
  const WCID = 'webhook:crm:t1';
  const make = (out: ChannelOutbound) =>
    new RunDelivery({ client: redis, prefix, conversationId: WCID, runId: 'run1', resolve: () => out, logger, sleep: async () => undefined });

  it('stores a reply once when an attempt died after the channel stored it, before the outbox recorded it', async () => {
    const hook = createWebhookOutbound({
      channelId: 'webhook:crm',
      config: webhookChannelConfigSchema.parse({ secret: 'a-long-enough-secret' }),
      redis,
      prefix,
    });
    // Attempt 1: the reply is stored, then the runner dies before it records the send (its send never returns).
    let stored!: () => void;
    const storedOnce = new Promise<void>((resolve) => (stored = resolve));
    const dying: ChannelOutbound = {
      ...hook,
      send: async (cid, text, opts) => {
        await hook.send(cid, text, opts);
        stored();
        return new Promise<never>(() => undefined);
      },
    };
    const first = make(dying);
    first.beginTurn(5);
    void first.message('the answer');
    await storedOnce;
    const records = async () => Object.values(await redis.hgetall(conversationKeys(prefix, WCID).outbox)).map((v) => JSON.parse(v) as OutboxRecord);
    expect(await records()).toEqual([{ status: 'possibly-dispatched' }]);

    // Attempt 2 answers the same message again: the channel finds the reply stored under its delivery key.
    const second = make(hook);
    second.beginTurn(5);
    await second.message('the answer, regenerated');

    const entries = await redis.xrange(replyStreamKey(prefix, WCID), '-', '+');
    expect(entries.map(([, fields]) => JSON.parse(fields[1]!).text)).toEqual(['the answer']);
    expect(await records()).toEqual([{ status: 'acknowledged', messageId: 'run1:5:0' }]);
  });
});
