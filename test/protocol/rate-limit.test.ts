/** Rate limits inside the ingest script: token buckets per sender and per conversation, against a real Redis. */
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors.js';
import type { IngestResult } from '../../src/protocol/index.js';
import type { MessageRefused } from '../../src/record/entries.js';
import { expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

// Refill slow enough that no token comes back while a test runs (no clock in these tests).
const SLOW = 0.001;

describe('ingest rate limits', () => {
  const fx = useProtocolFixture();
  const rateKey = () => `${fx.keys().base}rate`;

  describe('when a sender has used up their bucket', () => {
    it('records the next message as refused, with the message inside, and routes it nowhere', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 3, refillPerMinute: SLOW } } });
      const accepted = [];
      for (let i = 0; i < 3; i++) accepted.push(await d.ingest(fx.message(i)));
      expect(accepted.map((r) => r.kind)).toEqual(['new-run', 'joined', 'joined']);
      const refused = expectKind(await d.ingest(fx.message(3)), 'refused');
      expect(refused.limit).toBe('user');
      expect(refused.retryAfterMs).toBeGreaterThan(60_000);

      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'message.received', 'message.received', 'message.refused']);
      const entry = record[3] as MessageRefused & { seq: number };
      expect(entry.seq).toBe(refused.seq);
      expect(entry).toMatchObject({
        limit: 'user',
        retryAfterMs: refused.retryAfterMs,
        message: { kind: 'message.received', text: 'message 3', updateKey: 'telegram:3' },
      });
      // Not half-ingested: the run's inputs, steering and pending hold only the accepted messages.
      const runId = (accepted[0] as { runId: string }).runId;
      expect(await fx.inputs(runId)).toEqual(accepted.map((r) => r.seq));
      expect(await fx.steering(runId)).toEqual([]);
      expect(await fx.pending()).toEqual([]);
    });

    it('answers a redelivery of the refused update as a duplicate of the refusal, writing nothing', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 1, refillPerMinute: SLOW } } });
      await d.ingest(fx.message(0));
      const refused = expectKind(await d.ingest(fx.message(1)), 'refused');
      const before = await fx.snapshot();
      expect(await d.ingest(fx.message(1))).toEqual({ kind: 'duplicate', seq: refused.seq });
      expect(await fx.snapshot()).toEqual(before);
    });

    it('does not take a token for a redelivered accepted message', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 2, refillPerMinute: SLOW } } });
      const first = await d.ingest(fx.message(0));
      expect(await d.ingest(fx.message(0))).toEqual({ kind: 'duplicate', seq: first.seq });
      expect((await d.ingest(fx.message(1))).kind).toBe('joined');
    });

    it('still accepts another sender in the same conversation', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 1, refillPerMinute: SLOW } } });
      await d.ingest(fx.message(0));
      expect((await d.ingest(fx.message(1))).kind).toBe('refused');
      expect((await d.ingest(fx.message(2, { sender: { id: 'u2' } }))).kind).toBe('joined');
    });

    it('accepts again once the bucket has refilled', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 1, refillPerMinute: 1 } } });
      await d.ingest(fx.message(0));
      expect((await d.ingest(fx.message(1))).kind).toBe('refused');
      // A minute passes for the bucket: its last refill moves a minute back.
      const [tokens, at] = (await fx.redis.hget(rateKey(), 'u:u1'))!.split(':');
      await fx.redis.hset(rateKey(), 'u:u1', `${tokens}:${Number(at) - 60_000}`);
      expect((await d.ingest(fx.message(2))).kind).toBe('joined');
      expect((await d.ingest(fx.message(3))).kind).toBe('refused');
    });
  });

  describe('when the conversation has used up its bucket', () => {
    it('refuses every sender, naming the conversation limit', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 100, refillPerMinute: SLOW }, conversation: { capacity: 2, refillPerMinute: SLOW } } });
      await d.ingest(fx.message(0, { sender: { id: 'a' } }));
      await d.ingest(fx.message(1, { sender: { id: 'b' } }));
      expect(expectKind(await d.ingest(fx.message(2, { sender: { id: 'c' } })), 'refused').limit).toBe('conversation');
    });

    it('takes no token from the sender for a refused message', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 2, refillPerMinute: SLOW }, conversation: { capacity: 1, refillPerMinute: SLOW } } });
      await d.ingest(fx.message(0, { sender: { id: 'a' } }));
      expect((await d.ingest(fx.message(1, { sender: { id: 'b' } }))).kind).toBe('refused');
      // b's bucket was never written: it is still full.
      expect(await fx.redis.hexists(rateKey(), 'u:b')).toBe(0);
      expect(await fx.redis.hexists(rateKey(), 'u:a')).toBe(1);
    });
  });

  describe(`when many messages of one sender race in over several connections`, () => {
    it('accepts exactly the capacity and refuses the rest, each recorded once', async () => {
      const CAPACITY = 10;
      const MESSAGES = 60;
      const hosts = fx.connections(4).map((c) => fx.dispatch({ rateLimit: { user: { capacity: CAPACITY, refillPerMinute: SLOW } } }, c));
      const results: IngestResult[] = await Promise.all(Array.from({ length: MESSAGES }, (_, i) => hosts[i % 4]!.ingest(fx.message(i))));
      const accepted = results.filter((r) => r.kind !== 'refused');
      const refused = results.filter((r) => r.kind === 'refused');
      expect(accepted).toHaveLength(CAPACITY);
      expect(refused).toHaveLength(MESSAGES - CAPACITY);
      expect(results.filter((r) => r.kind === 'duplicate')).toHaveLength(0);
      const record = await fx.record();
      expect(
        record
          .filter((e) => e.kind === 'message.received')
          .map((e) => e.seq)
          .sort((a, b) => a - b),
      ).toEqual(accepted.map((r) => r.seq).sort((a, b) => a - b));
      expect(
        record
          .filter((e) => e.kind === 'message.refused')
          .map((e) => e.seq)
          .sort((a, b) => a - b),
      ).toEqual(refused.map((r) => r.seq).sort((a, b) => a - b));
      expect(record).toHaveLength(MESSAGES);
    });

    it('gives one refusal and duplicates for concurrent deliveries of one refused update', async () => {
      const hosts = fx.connections(4).map((c) => fx.dispatch({ rateLimit: { user: { capacity: 1, refillPerMinute: SLOW } } }, c));
      await hosts[0]!.ingest(fx.message(0));
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => hosts[i % 4]!.ingest(fx.message(1))));
      const refused = results.filter((r) => r.kind === 'refused');
      expect(refused).toHaveLength(1);
      expect(results.filter((r) => r.kind === 'duplicate').map((r) => r.seq)).toEqual(Array(11).fill(refused[0]!.seq));
      expect(await fx.kinds()).toEqual(['message.received', 'message.refused']);
    });
  });

  describe('without limits', () => {
    it('writes no bucket and refuses nothing', async () => {
      const d = fx.dispatch();
      for (let i = 0; i < 30; i++) expect((await d.ingest(fx.message(i))).kind).not.toBe('refused');
      expect(await fx.redis.exists(rateKey())).toBe(0);
    });

    it('keeps the bucket hash only until every bucket in it would be full again', async () => {
      const d = fx.dispatch({ rateLimit: { user: { capacity: 2, refillPerMinute: 60 }, conversation: { capacity: 10, refillPerMinute: 60 } } });
      await d.ingest(fx.message(0));
      const ttl = await fx.redis.pttl(rateKey());
      expect(ttl).toBeGreaterThan(2_000);
      expect(ttl).toBeLessThanOrEqual(10_000);
    });
  });

  it('rejects a bucket without capacity or refill', () => {
    expect(() => fx.dispatch({ rateLimit: { user: { capacity: 0, refillPerMinute: 1 } } })).toThrow(InvalidInputError);
    expect(() => fx.dispatch({ rateLimit: { conversation: { capacity: 1, refillPerMinute: 0 } } })).toThrow(InvalidInputError);
  });
});
