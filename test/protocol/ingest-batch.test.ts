/** Group commit: the updates ingested in one event-loop turn share one script call, and each still gets its own answer. */

import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ScriptError } from '../../src/errors.js';
import { Dispatch } from '../../src/protocol/index.js';
import { isRedisUnavailable } from '../../src/redis/connection.js';
import { freePort } from '../../src/redis/local.js';
import { DEFAULT_MAX_BATCH, hashTag, ScriptBatcher } from '../../src/scripts/batch.js';
import { runScript } from '../../src/scripts/index.js';
import { SCRIPT_ERRORS } from '../../src/scripts/results.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('ingest batching', () => {
  const fx = useProtocolFixture();

  describe('when 50 conversations each get a message in the same turn', () => {
    it(`sends them in calls of at most ${DEFAULT_MAX_BATCH} and answers every message as a lone call would`, async () => {
      const dispatch = fx.dispatch();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => dispatch.ingest(fx.message(i, { conversationId: `telegram:c${i}` }))));

      expect(dispatch.ingestBatch.stats).toEqual({ calls: Math.ceil(50 / DEFAULT_MAX_BATCH), items: 50 });
      for (const [i, r] of results.entries()) {
        expect(r).toMatchObject({ kind: 'new-run', seq: 1 });
        expect(await fx.kinds(`telegram:c${i}`)).toEqual(['message.received']);
      }
      expect(new Set(results.map((r) => (r as { runId: string }).runId)).size).toBe(50);
    });
  });

  describe('when one conversation gets 10 messages in the same turn', () => {
    it('handles them in the order they were handed in', async () => {
      const dispatch = fx.dispatch();
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => dispatch.ingest(fx.message(i))));

      expect(dispatch.ingestBatch.stats.calls).toBe(1);
      expect(results.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(results.map((r) => r.kind)).toEqual(['new-run', ...Array(9).fill('joined')]);
      const record = await fx.record();
      expect(record.map((e) => (e as { updateKey?: string }).updateKey)).toEqual(Array.from({ length: 10 }, (_, i) => fx.message(i).updateKey));
      const runId = (results[0] as { runId: string }).runId;
      expect(await fx.inputs(runId)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });
  });

  describe('when the same update arrives three times in one turn', () => {
    it('accepts it once and answers the other two duplicate with its seq', async () => {
      const dispatch = fx.dispatch();
      const results = await Promise.all([1, 2, 3].map(() => dispatch.ingest(fx.message('same'))));

      expect(dispatch.ingestBatch.stats.calls).toBe(1);
      expect(results).toEqual([expect.objectContaining({ kind: 'new-run', seq: 1 }), { kind: 'duplicate', seq: 1 }, { kind: 'duplicate', seq: 1 }]);
      expect(await fx.recordLength()).toBe(1);
    });
  });

  describe('when one update of a call fails in Redis', () => {
    it('fails that update alone; the others before and after it are ingested', async () => {
      const dispatch = fx.dispatch();
      // A meta key of the wrong type: HINCRBY on it fails with WRONGTYPE.
      await fx.redis.set(fx.keys('telegram:broken').meta, 'not a hash');

      const settled = await Promise.allSettled([
        dispatch.ingest(fx.message(1, { conversationId: 'telegram:a' })),
        dispatch.ingest(fx.message(2, { conversationId: 'telegram:broken' })),
        dispatch.ingest(fx.message(3, { conversationId: 'telegram:b' })),
      ]);

      expect(dispatch.ingestBatch.stats.calls).toBe(1);
      expect(settled[0]).toMatchObject({ status: 'fulfilled', value: { kind: 'new-run', seq: 1 } });
      expect(settled[1]).toMatchObject({ status: 'rejected' });
      const err = (settled[1] as PromiseRejectedResult).reason as Error;
      expect(err).toBeInstanceOf(ScriptError);
      expect(err.message).toMatch(/WRONGTYPE/);
      expect(settled[2]).toMatchObject({ status: 'fulfilled', value: { kind: 'new-run', seq: 1 } });
      expect(await fx.kinds('telegram:a')).toEqual(['message.received']);
      expect(await fx.kinds('telegram:b')).toEqual(['message.received']);
    });

    it('after its dedupe mark, a redelivery once Redis is mended is a new message, not a duplicate of a seq never recorded', async () => {
      const dispatch = fx.dispatch();
      const keys = fx.keys('telegram:broken-log');
      // A record key of the wrong type: the update passes the dedupe check and mark, then XADD fails.
      await fx.redis.set(keys.log, 'not a stream');
      const message = fx.message(7, { conversationId: 'telegram:broken-log' });

      await expect(dispatch.ingest(message)).rejects.toThrow(/WRONGTYPE/);
      expect(await fx.redis.exists(keys.dedupe(message.updateKey))).toBe(0);

      await fx.redis.del(keys.log);
      const redelivered = await dispatch.ingest(message);
      expect(redelivered.kind).toBe('new-run');
      expect(await fx.kinds('telegram:broken-log')).toEqual(['message.received']);
      expect(await dispatch.ingest(message)).toEqual({ kind: 'duplicate', seq: redelivered.seq });
    });
  });

  describe('when more updates arrive in one turn than a call may carry', () => {
    it('splits them into calls of at most maxItems, one round trip each', async () => {
      const batcher = new ScriptBatcher(fx.redis, 'ingest', { maxItems: 4 });
      const k = fx.keys(CID);
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          batcher.run(
            [k.base, k.dedupe(`u${i}`)],
            [JSON.stringify({ v: 1, kind: 'message.received', at: 1, updateKey: `u${i}`, sender: { id: '1' }, text: `m${i}` }), `steer|1|20|60|r${i}`],
          ),
        ),
      );

      expect(batcher.stats).toEqual({ calls: 3, items: 10 });
      expect(replies.map((r) => r[1])).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });
  });

  describe('when updates arrive in different turns', () => {
    it('sends each turn its own call', async () => {
      const dispatch = fx.dispatch();
      await dispatch.ingest(fx.message(1));
      await dispatch.ingest(fx.message(2));
      expect(dispatch.ingestBatch.stats).toEqual({ calls: 2, items: 2 });
    });
  });

  describe('when Redis cannot be reached', () => {
    it('rejects every update of the call with the connection error', async () => {
      const down = new Redis({ port: await freePort(), lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
      try {
        const dispatch = new Dispatch({ client: down, prefix: fx.prefix });
        const settled = await Promise.allSettled([1, 2, 3].map((i) => dispatch.ingest(fx.message(i, { conversationId: `telegram:c${i}` }))));
        expect(dispatch.ingestBatch.stats.calls).toBe(1);
        expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
        expect(isRedisUnavailable((settled[0] as PromiseRejectedResult).reason)).toBe(true);
      } finally {
        down.disconnect();
      }
    });
  });

  it('refuses a script that is not a batch script, and a call size below 1', () => {
    expect(() => new ScriptBatcher(fx.redis, 'heartbeat')).toThrow(/not a batch script/);
    expect(() => new ScriptBatcher(fx.redis, 'ingest', { maxItems: 0 })).toThrow(/maxItems must be a positive integer/);
  });

  describe('when one item of a turn is malformed', () => {
    it('refuses that item alone, before Redis; the others of the turn share a call', async () => {
      const batcher = new ScriptBatcher(fx.redis, 'ingest');
      const k = fx.keys(CID);
      const item = (i: number) => [
        JSON.stringify({ v: 1, kind: 'message.received', at: 1, updateKey: `u${i}`, sender: { id: '1' }, text: `m${i}` }),
        `steer|1|20|60|r${i}`,
      ];
      const settled = await Promise.allSettled([
        batcher.run([k.base, k.dedupe('u1')], item(1)),
        batcher.run([k.base, k.dedupe('u2'), 'extra'], item(2)),
        batcher.run([k.base, ''], item(3)),
        batcher.run([k.base, k.dedupe('u4')], [...item(4), 'extra']),
        batcher.run([k.base, k.dedupe('u5')], item(5)),
      ]);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled']);
      expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/an item takes 2 non-empty keys/);
      expect(String((settled[3] as PromiseRejectedResult).reason)).toMatch(/an item takes 2 arguments, got 3/);
      expect(batcher.stats).toEqual({ calls: 1, items: 2 });
      expect(await fx.recordLength()).toBe(2);
    });
  });

  it('the script refuses a call whose keys and arguments do not pair up, writing nothing', async () => {
    const k = fx.keys(CID);
    const reply = await runScript(fx.redis, 'ingest', [k.base, k.dedupe('u1')], ['{}']);
    expect(reply).toEqual([[SCRIPT_ERRORS.BAD_ARG]]);
    expect(await fx.recordLength()).toBe(0);
  });
});

describe('hashTag', () => {
  it('is what Redis Cluster hashes a key by', () => {
    expect(hashTag('sb:{c:telegram:42}:meta')).toBe('c:telegram:42');
    expect(hashTag('sb:{c:telegram:42}:dedupe:{x}')).toBe('c:telegram:42');
    expect(hashTag('plain')).toBe('plain');
    expect(hashTag('a{}b{c}')).toBe('a{}b{c}');
  });
});
