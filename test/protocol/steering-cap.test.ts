/** The steering list of a run is capped; overflow goes to pending, audited, never dropped. */
import { describe, expect, it } from 'vitest';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('ingest with a steering cap', () => {
  const fx = useProtocolFixture();

  describe('when the running run’s steering list is full', () => {
    it('sends the 4th and 5th message to pending with reason overflow and records steering.overflow', async () => {
      const { dispatch, runId } = await fx.running({ steeringCap: 3 });
      // seq 1 start message, seq 2 run.started; each steered message is followed by its steering.queued entry.
      expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'steered', seq: 3, runId, depth: 1 });
      expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'steered', seq: 5, runId, depth: 2 });
      expect(await dispatch.ingest(fx.message(3))).toEqual({ kind: 'steered', seq: 7, runId, depth: 3 });
      expect(await dispatch.ingest(fx.message(4))).toEqual({ kind: 'pending', seq: 9, runId, depth: 1, reason: 'overflow' });
      expect(await dispatch.ingest(fx.message(5))).toEqual({ kind: 'pending', seq: 11, runId, depth: 2, reason: 'overflow' });

      expect(await fx.steering(runId)).toEqual([3, 5, 7]);
      expect(await fx.pending()).toEqual([9, 11]);
      const record = await fx.record();
      expect(record.slice(2).map((e) => e.kind)).toEqual([
        'message.received',
        'steering.queued',
        'message.received',
        'steering.queued',
        'message.received',
        'steering.queued',
        'message.received',
        'steering.overflow',
        'message.received',
        'steering.overflow',
      ]);
      expect(record[9]).toMatchObject({ seq: 10, kind: 'steering.overflow', run: runId, seqs: [9], cap: 3 });
      expect(record[11]).toMatchObject({ seq: 12, kind: 'steering.overflow', run: runId, seqs: [11], cap: 3 });
      expect(await dispatch.status(CID)).toMatchObject({ steeringDepth: 3, pendingDepth: 2 });
    });

    it('queues later messages behind the overflow even once a pull made room (answer order is kept)', async () => {
      const { dispatch, runs, run, runId } = await fx.running({ steeringCap: 1 });
      expect(await dispatch.ingest(fx.message(1))).toMatchObject({ kind: 'steered', depth: 1 });
      expect(await dispatch.ingest(fx.message(2))).toMatchObject({ kind: 'pending', reason: 'overflow' });
      expect((await runs.pull(run)).map((e) => e.seq)).toEqual([3]);
      expect(await dispatch.ingest(fx.message(3))).toMatchObject({ kind: 'pending', runId, depth: 2, reason: 'order' });
      expect(await fx.pending()).toEqual([5, 8]);
    });

    it('steers again once pending has drained into a successor', async () => {
      const { dispatch, runs, run } = await fx.running({ steeringCap: 1 });
      await dispatch.ingest(fx.message(1)); // 3 steered
      await dispatch.ingest(fx.message(2)); // 5 overflow
      const fin = await runs.finish(run, 'failed', { successorId: 'run-next' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-next', inputs: [3, 5] } });
      const next = await runs.acquire(CID, 'run-next', 'worker-2');
      expect(next.inputs).toEqual([3, 5]);
      expect(await dispatch.ingest(fx.message(3))).toMatchObject({ kind: 'steered', runId: 'run-next', depth: 1 });
    });
  });
});
