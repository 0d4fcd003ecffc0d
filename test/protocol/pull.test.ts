/** pull: a running run takes its steering at a turn boundary, all at once or one by one. */
import { describe, expect, it } from 'vitest';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('pull', () => {
  const fx = useProtocolFixture();

  /** A running run with three steered messages: seqs 3, 5, 7 (each followed by its steering.queued). */
  async function withSteering() {
    const r = await fx.running();
    for (const n of [1, 2, 3]) await r.dispatch.ingest(fx.message(n));
    expect(await fx.steering(r.runId)).toEqual([3, 5, 7]);
    return r;
  }

  describe('in mode all', () => {
    it('takes every steered message in order and records one steering.injected naming them', async () => {
      const { runs, run, runId } = await withSteering();

      const pulled = await runs.pull(run, 'all');
      expect(pulled.map((e) => [e.seq, e.kind])).toEqual([
        [3, 'message.received'],
        [5, 'message.received'],
        [7, 'message.received'],
      ]);
      expect(pulled.map((e) => (e.kind === 'message.received' ? e.text : ''))).toEqual(['message 1', 'message 2', 'message 3']);
      expect(await fx.steering(runId)).toEqual([]);

      const record = await fx.record();
      expect(record).toHaveLength(9);
      expect(record[8]).toEqual({ seq: 9, v: 1, kind: 'steering.injected', at: expect.any(Number), run: runId, seqs: [3, 5, 7] });
      expect(await fx.dispatch().status(CID)).toMatchObject({ steeringDepth: 0 });
    });

    it('is the default mode', async () => {
      const { runs, run } = await withSteering();
      expect(await runs.pull(run)).toHaveLength(3);
    });
  });

  describe('in mode one', () => {
    it('takes one message per call, oldest first, each with its own steering.injected', async () => {
      const { runs, run, runId } = await withSteering();

      expect((await runs.pull(run, 'one')).map((e) => e.seq)).toEqual([3]);
      expect(await fx.steering(runId)).toEqual([5, 7]);
      expect((await runs.pull(run, 'one')).map((e) => e.seq)).toEqual([5]);
      expect((await runs.pull(run, 'one')).map((e) => e.seq)).toEqual([7]);
      expect(await runs.pull(run, 'one')).toEqual([]);

      const injected = (await fx.record()).filter((e) => e.kind === 'steering.injected');
      expect(injected.map((e) => ('seqs' in e ? e.seqs : []))).toEqual([[3], [5], [7]]);
    });
  });

  describe('when nothing is steered', () => {
    it.each(['all', 'one'] as const)('returns [] in mode %s and records nothing', async (mode) => {
      const { runs, run } = await fx.running();
      const before = await fx.snapshot();
      expect(await runs.pull(run, mode)).toEqual([]);
      expect(await fx.snapshot()).toEqual(before);
    });
  });

  describe('when a stop was requested', () => {
    it.each(['stop', 'interrupt', 'supersede'] as const)('returns [] after a %s request and keeps the steering list', async (kind) => {
      const { dispatch, runs, run, runId } = await withSteering();
      await dispatch.requestStop(fx.source(1), kind);
      const before = await fx.snapshot();

      expect(await runs.pull(run, 'all')).toEqual([]);
      expect(await runs.pull(run, 'one')).toEqual([]);
      expect(await fx.steering(runId)).toEqual([3, 5, 7]);
      expect(await fx.snapshot()).toEqual(before);
    });
  });
});
