/** Bounded growth: ended runs' hashes expire, the run index prunes itself, old outbox entries are pruned by age. */
import { describe, expect, it } from 'vitest';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

describe('ended runs', () => {
  it('expire after endedRunTtlSeconds (default 1 day), set by finish; the index entry carries the expiry', async () => {
    const { runs, run, runId } = await fx.running();
    expect(await fx.redis.ttl(fx.keys().run(runId))).toBe(-1);
    expect(await fx.redis.zscore(fx.keys().runs, runId)).toBe('inf');
    await runs.finish(run, 'completed');
    const ttl = await fx.redis.ttl(fx.keys().run(runId));
    expect(ttl).toBeGreaterThan(86_000);
    expect(ttl).toBeLessThanOrEqual(86_400);
    const score = Number(await fx.redis.zscore(fx.keys().runs, runId));
    expect(score - (await fx.redisTime())).toBeGreaterThan(85_000_000);
  });

  it('are kept when endedRunTtlSeconds is 0', async () => {
    const { runs, run, runId } = await fx.running({ retention: { endedRunTtlSeconds: 0 } });
    await runs.finish(run, 'completed');
    expect(await fx.redis.ttl(fx.keys().run(runId))).toBe(-1);
    expect(await fx.redis.zscore(fx.keys().runs, runId)).toBe('inf');
  });

  it('a live run never expires, and a successor is indexed with it', async () => {
    const { dispatch, runs, run, runId } = await fx.running();
    await dispatch.setPolicy(fx.source(1), 'collect');
    expectKind(await dispatch.ingest(fx.message(2)), 'pending');
    const fin = await runs.finish(run, 'completed');
    if (fin.kind !== 'ended' || !fin.successor) throw new Error('expected a successor');
    expect(await fx.redis.ttl(fx.keys().run(fin.successor.runId))).toBe(-1);
    expect(await fx.redis.zscore(fx.keys().runs, fin.successor.runId)).toBe('inf');
    expect(await fx.redis.ttl(fx.keys().run(runId))).toBeGreaterThan(0);
  });

  it('index entries of runs whose keys already expired are pruned at the next finish', async () => {
    const { runs, run } = await fx.running();
    await fx.redis.zadd(fx.keys().runs, 1, 'long-gone-run');
    await runs.finish(run, 'completed');
    expect(await fx.redis.zscore(fx.keys().runs, 'long-gone-run')).toBeNull();
  });
});

describe('outbox', () => {
  const claim = async (key: string, runId: string, token: number, ttl = 3600) =>
    checkReply(
      'outbox-claim',
      await runScript(
        fx.redis,
        'outbox-claim',
        [fx.keys().outbox, fx.keys().run(runId), fx.keys().outboxIndex],
        [key, token, '{"status":"possibly-dispatched"}', ttl],
      ),
    );

  it('indexes each delivery key by its first claim and prunes entries older than the TTL', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    // An entry from long ago, as a conversation that is never idle for the TTL accumulates them.
    await fx.redis.hset(k.outbox, 'old-run:1:0', '{"status":"acknowledged"}');
    await fx.redis.zadd(k.outboxIndex, 1, 'old-run:1:0');
    await claim(`${runId}:1:0`, runId, run.token);
    expect(await fx.redis.hkeys(k.outbox)).toEqual([`${runId}:1:0`]);
    expect(await fx.redis.zrange(k.outboxIndex, '0', '-1')).toEqual([`${runId}:1:0`]);
    expect(await fx.redis.ttl(k.outboxIndex)).toBeGreaterThan(3500);
  });

  it('keeps entries younger than the TTL, and a re-claim keeps the first claim time', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    await claim(`${runId}:1:0`, runId, run.token);
    const first = await fx.redis.zscore(k.outboxIndex, `${runId}:1:0`);
    await claim(`${runId}:1:1`, runId, run.token);
    await claim(`${runId}:1:0`, runId, run.token);
    expect((await fx.redis.hkeys(k.outbox)).sort()).toEqual([`${runId}:1:0`, `${runId}:1:1`]);
    expect(await fx.redis.zscore(k.outboxIndex, `${runId}:1:0`)).toBe(first);
  });

  it('prunes at most 100 per claim, so one claim stays cheap', async () => {
    const { run, runId } = await fx.running();
    const k = fx.keys();
    const p = fx.redis.pipeline();
    for (let i = 0; i < 150; i++) {
      p.hset(k.outbox, `old:${i}`, '{}');
      p.zadd(k.outboxIndex, i + 1, `old:${i}`);
    }
    await p.exec();
    await claim(`${runId}:1:0`, runId, run.token);
    expect(await fx.redis.hlen(k.outbox)).toBe(51);
    await claim(`${runId}:1:1`, runId, run.token);
    expect(await fx.redis.hlen(k.outbox)).toBe(2);
    expect(await fx.redis.zcard(k.outboxIndex)).toBe(2);
  });
});

describe('conversation id in the index', () => {
  it('uses the conversation slot (every key shares the hash tag)', () => {
    for (const key of [fx.keys().runs, fx.keys().outboxIndex, fx.keys().tombstone]) expect(key).toContain(`{c:${CID}}`);
  });
});
