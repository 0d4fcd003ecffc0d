/**
 * Count bounds of a conversation that never goes quiet: the run index keeps
 * the newest `indexMaxEntries` ended runs (older hashes go with them), and the
 * outbox the newest acknowledged records; nothing a live run or a retry needs
 * is dropped.
 */
import { describe, expect, it } from 'vitest';
import type { RunRef } from '../../src/protocol/index.js';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

/** Runs `n` whole turns (ingest, acquire, finish) with the given bound; returns the run ids, oldest first. */
async function turns(n: number, indexMaxEntries: number, from = 1): Promise<string[]> {
  const d = fx.dispatch();
  const runs = fx.runs({ retention: { indexMaxEntries } });
  const ids: string[] = [];
  for (let i = from; i < from + n; i++) {
    const r = expectKind(await d.ingest(fx.message(i)), 'new-run');
    const run = await runs.acquire(CID, r.runId, 'w1');
    await runs.finish(run, 'completed');
    ids.push(r.runId);
  }
  return ids;
}

describe('the run index', () => {
  it('keeps the newest indexMaxEntries ended runs and deletes the older ones with their hashes', async () => {
    const ids = await turns(5, 3);
    const k = fx.keys();
    expect(await fx.redis.zrange(k.runs, '0', '-1')).toEqual(ids.slice(2));
    for (const id of ids.slice(0, 2)) expect(await fx.redis.exists(k.run(id))).toBe(0);
    for (const id of ids.slice(2)) expect(await fx.redis.hget(k.run(id), 'state')).toBe('ended');
  });

  it('never counts or drops the live run (a successor created by the same finish)', async () => {
    const ended = await turns(3, 5);
    const d = fx.dispatch();
    const runs = fx.runs({ retention: { indexMaxEntries: 1 } });
    const r = expectKind(await d.ingest(fx.message(10)), 'new-run');
    const run = await runs.acquire(CID, r.runId, 'w1');
    await d.setPolicy(fx.source(11), 'collect');
    expectKind(await d.ingest(fx.message(12)), 'pending');
    const fin = await runs.finish(run, 'completed');
    if (fin.kind !== 'ended' || !fin.successor) throw new Error('expected a successor');
    const k = fx.keys();
    expect((await fx.redis.zrange(k.runs, '0', '-1', 'WITHSCORES')).filter((_, i) => i % 2 === 0)).toEqual([r.runId, fin.successor.runId]);
    expect(await fx.redis.zscore(k.runs, fin.successor.runId)).toBe('inf');
    expect(await fx.redis.hget(k.run(fin.successor.runId), 'state')).toBe('queued');
    for (const id of ended) expect(await fx.redis.exists(k.run(id))).toBe(0);
  });

  it('drops expired entries and the ended runs over the bound at the same finish', async () => {
    const k = fx.keys();
    await fx.redis.zadd(k.runs, 1, 'expired-a', 2, 'expired-b');
    const ids = await turns(5, 3);
    expect(await fx.redis.zrange(k.runs, '0', '-1')).toEqual(ids.slice(2));
    for (const id of ids.slice(0, 2)) expect(await fx.redis.exists(k.run(id))).toBe(0);
  });

  it('keeps the same bound above the size read in one step (indexMaxEntries 5000)', async () => {
    const k = fx.keys();
    await fx.redis.zadd(k.runs, 1, 'expired-a');
    const ids = await turns(3, 5000);
    expect(await fx.redis.zrange(k.runs, '0', '-1')).toEqual(ids);
  });

  it('prunes nothing by count when indexMaxEntries is 0', async () => {
    const ids = await turns(4, 0);
    expect(await fx.redis.zcard(fx.keys().runs)).toBe(4);
    for (const id of ids) expect(await fx.redis.exists(fx.keys().run(id))).toBe(1);
  });
});

describe('the outbox', () => {
  const claim = (run: RunRef, key: string, keep: number) =>
    runScript(
      fx.redis,
      'outbox-claim',
      [fx.keys().outbox, fx.keys().run(run.runId), fx.keys().outboxIndex],
      [key, run.token, '{"status":"possibly-dispatched"}', 3600, keep],
    ).then((r) => checkReply('outbox-claim', r));

  /** Records of ended runs, claimed oldest first (scores 1..n), with the given statuses. */
  async function oldRecords(statuses: string[]): Promise<string[]> {
    const k = fx.keys();
    const now = await fx.redisTime();
    const p = fx.redis.pipeline();
    const keys = statuses.map((status, i) => {
      const key = `old-run-${i}:${i}:0`;
      p.hset(k.outbox, key, JSON.stringify({ status }));
      p.zadd(k.outboxIndex, now - 10_000 + i, key);
      return key;
    });
    await p.exec();
    return keys;
  }

  it('drops acknowledged records beyond the newest indexMaxEntries, oldest first, with their reply marks', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const old = await oldRecords(['acknowledged', 'acknowledged', 'acknowledged', 'acknowledged']);
    await fx.redis.set(k.replyStored(old[0]!), '1-0', 'EX', 3600);
    await claim(run, `${runId}:1:0`, 3);
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([old[2], old[3], `${runId}:1:0`]);
    expect((await fx.redis.hkeys(k.outbox)).sort()).toEqual([old[2], old[3], `${runId}:1:0`].sort());
    expect(await fx.redis.exists(k.replyStored(old[0]!))).toBe(0);
  });

  it('keeps records not acknowledged (possibly-dispatched, not-dispatched, streaming) however old', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const old = await oldRecords(['possibly-dispatched', 'not-dispatched', 'acknowledged', 'acknowledged']);
    await fx.redis.hset(k.outbox, old[3]!, JSON.stringify({ status: 'possibly-dispatched', streaming: true, messageId: '9' }));
    await claim(run, `${runId}:1:0`, 1);
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([old[0], old[1], old[3], `${runId}:1:0`]);
    expect(JSON.parse((await fx.redis.hget(k.outbox, old[0]!))!)).toEqual({ status: 'possibly-dispatched' });
  });

  it('drops acknowledged records behind more than 100 that must stay (the oldest ones not acknowledged do not stop the bound)', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const old = await oldRecords([...Array<string>(120).fill('possibly-dispatched'), ...Array<string>(5).fill('acknowledged')]);
    await claim(run, `${runId}:1:0`, 3);
    // The newest 3 stay; of the older ones, the acknowledged go (100 stuck at the front used to stop the look).
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([...old.slice(0, 120), old[123], old[124], `${runId}:1:0`]);
  });

  it("keeps the live run's acknowledged records: a retried attempt must find them", async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    for (let i = 0; i < 3; i++) {
      await claim(run, `${runId}:1:${i}`, 2);
      await fx.redis.hset(k.outbox, `${runId}:1:${i}`, JSON.stringify({ status: 'acknowledged', messageId: String(i) }));
    }
    await claim(run, `${runId}:1:3`, 2);
    expect(await fx.redis.zcard(k.outboxIndex)).toBe(4);
    // A second attempt of the run is told the first reply was delivered, not asked to send it again.
    const again = await claim(run, `${runId}:1:0`, 2);
    expect(again[0]).toBe('delivered');
  });

  it('counts an outbox longer than one read of its index, and drops at most 100 of it per claim', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const old = await oldRecords(Array<string>(450).fill('acknowledged'));
    await claim(run, `${runId}:1:0`, 10);
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([...old.slice(100), `${runId}:1:0`]);
    expect(await fx.redis.hlen(k.outbox)).toBe(351);
  });

  it('prunes aged records and those over the bound at the same claim', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const old = await oldRecords(['acknowledged', 'acknowledged', 'acknowledged', 'acknowledged']);
    await fx.redis.hset(k.outbox, 'aged-run:1:0', '{"status":"possibly-dispatched"}');
    await fx.redis.zadd(k.outboxIndex, 1, 'aged-run:1:0');
    await claim(run, `${runId}:1:0`, 3);
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([old[2], old[3], `${runId}:1:0`]);
    expect(await fx.redis.hexists(k.outbox, 'aged-run:1:0')).toBe(0);
  });

  it('keeps every record when indexMaxEntries is 0', async () => {
    const { run, runId } = await fx.running();
    await oldRecords(['acknowledged', 'acknowledged', 'acknowledged']);
    await claim(run, `${runId}:1:0`, 0);
    expect(await fx.redis.zcard(fx.keys().outboxIndex)).toBe(4);
  });
});
