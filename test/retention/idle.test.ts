/** Idle expiry: a conversation with no active run and nothing waiting expires after `idleTtlSeconds`; activity makes it persistent again. */
import { describe, expect, it } from 'vitest';
import { CHECKPOINT_KEY } from '../../runner/compaction/checkpoint.js';
import { resolveRetention, retainConversation } from '../../src/protocol/retention.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();
const IDLE = 3600;

describe('idle expiry', () => {
  it('is off by default: nothing of an idle conversation expires but ended runs', async () => {
    const { runs, run } = await fx.running();
    await runs.finish(run, 'completed');
    for (const key of [fx.keys().log, fx.keys().meta, fx.keys().runs]) expect(await fx.redis.ttl(key)).toBe(-1);
  });

  it('sets the TTL on every key of the conversation when its last run ends, and lowers longer ones', async () => {
    const { runs, run, runId } = await fx.running({ retention: { idleTtlSeconds: IDLE } });
    await fx.state({}).set(run, CHECKPOINT_KEY, { any: 1 });
    await runs.finish(run, 'completed');
    const k = fx.keys();
    for (const key of [k.log, k.meta, k.state, k.runs, k.run(runId)]) {
      const ttl = await fx.redis.ttl(key);
      expect(ttl, key).toBeGreaterThan(IDLE - 100);
      expect(ttl, key).toBeLessThanOrEqual(IDLE);
    }
  });

  it('does not expire a conversation whose run ends with a successor', async () => {
    const { dispatch, runs, run } = await fx.running({ retention: { idleTtlSeconds: IDLE } });
    await dispatch.setPolicy(fx.source(1), 'collect');
    expectKind(await dispatch.ingest(fx.message(2)), 'pending');
    await runs.finish(run, 'completed');
    expect(await fx.redis.ttl(fx.keys().log)).toBe(-1);
    expect(await fx.redis.ttl(fx.keys().meta)).toBe(-1);
  });

  it('never applies while a run is active, whenever it is called', async () => {
    await fx.running();
    const r = await retainConversation(fx.redis, fx.prefix, CID, resolveRetention({ idleTtlSeconds: IDLE }));
    expect(r.expiring).toBe(false);
    expect(await fx.redis.ttl(fx.keys().log)).toBe(-1);
  });

  it('a new run makes the conversation persistent again', async () => {
    const { dispatch, runs, run } = await fx.running({ retention: { idleTtlSeconds: IDLE } });
    await runs.finish(run, 'completed');
    expect(await fx.redis.ttl(fx.keys().log)).toBeGreaterThan(0);
    expectKind(await dispatch.ingest(fx.message(2)), 'new-run');
    const k = fx.keys();
    for (const key of [k.log, k.meta, k.runs]) expect(await fx.redis.ttl(key), key).toBe(-1);
  });

  it('a new run makes the hashes of ended runs kept for good persistent again', async () => {
    const { dispatch, runs, run, runId } = await fx.running({ retention: { idleTtlSeconds: IDLE, endedRunTtlSeconds: 0 } });
    await runs.finish(run, 'completed');
    expect(await fx.redis.ttl(fx.keys().run(runId))).toBeGreaterThan(0);
    expectKind(await dispatch.ingest(fx.message(2)), 'new-run');
    expect(await fx.redis.ttl(fx.keys().run(runId))).toBe(-1);
  });
});
