/** ingest routes a message by the input policy and the state of the active run (DESIGN "Dispatch"). */
import { describe, expect, it } from 'vitest';
import { INPUT_POLICIES } from '../../src/protocol/index.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('ingest', () => {
  const fx = useProtocolFixture();

  describe.each(INPUT_POLICIES)('with policy %s', (policy) => {
    describe('when no run is active', () => {
      it('creates a queued run with the message as its only input and makes it active', async () => {
        const d = fx.dispatch({ defaultPolicy: policy });
        const r = expectKind(await d.ingest(fx.message(1)), 'new-run');
        expect(r.seq).toBe(1);
        expect(r.runId).toMatch(/^r[a-z0-9]+$/);

        expect(await fx.runRecord(r.runId)).toMatchObject({
          id: r.runId,
          conversation: CID,
          state: 'queued',
          token: '0',
          attempt: '0',
          cause: 'ingest',
        });
        expect(await fx.inputs(r.runId)).toEqual([1]);
        const st = await d.status(CID);
        expect(st).toMatchObject({ activeRunId: r.runId, runState: 'queued', steeringDepth: 0, pendingDepth: 0, lastSeq: 1 });
        expect(await fx.kinds()).toEqual(['message.received']);
        const [entry] = await fx.record();
        expect(entry).toMatchObject({ seq: 1, kind: 'message.received', updateKey: 'telegram:1', text: 'message 1', sender: { id: 'u1', name: 'Ann' } });
      });

      it('uses the run id the caller gives', async () => {
        const d = fx.dispatch({ defaultPolicy: policy });
        expect(await d.ingest(fx.message(1), { runId: 'run-given-1' })).toEqual({ kind: 'new-run', seq: 1, runId: 'run-given-1' });
        expect(await fx.redis.get(fx.keys().active)).toBe('run-given-1');
      });
    });

    describe('when the active run is still queued', () => {
      if (policy === 'followup') {
        // DESIGN's table: followup + "active run still queued" -> pending, each pending message its own successor.
        it('keeps the message pending for its own successor instead of joining the queued run', async () => {
          const d = fx.dispatch({ defaultPolicy: policy });
          const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
          const r = await d.ingest(fx.message(2));
          expect(r).toEqual({ kind: 'pending', seq: 2, runId: first.runId, depth: 1, reason: 'policy' });
          expect(await fx.inputs(first.runId)).toEqual([1]);
          expect(await fx.pending()).toEqual([2]);
        });
        return;
      }

      it('joins the message to the queued run’s inputs', async () => {
        const d = fx.dispatch({ defaultPolicy: policy });
        const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
        expect(await d.ingest(fx.message(2))).toEqual({ kind: 'joined', seq: 2, runId: first.runId });
        expect(await d.ingest(fx.message(3))).toEqual({ kind: 'joined', seq: 3, runId: first.runId });

        expect(await fx.inputs(first.runId)).toEqual([1, 2, 3]);
        const run = await fx.runRecord(first.runId);
        expect(run.state).toBe('queued');
        expect(run.stop).toBeUndefined();
        expect(await fx.pending()).toEqual([]);
        expect(await fx.steering(first.runId)).toEqual([]);
        expect(await fx.kinds()).toEqual(['message.received', 'message.received', 'message.received']);
      });
    });
  });

  describe('when the active run is running', () => {
    describe('with policy steer', () => {
      it('steers the message into the run’s steering list and records steering.queued', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: 'steer' });
        // seq 1 message, seq 2 run.started
        expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'steered', seq: 3, runId, depth: 1 });
        expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'steered', seq: 5, runId, depth: 2 });

        expect(await fx.steering(runId)).toEqual([3, 5]);
        expect(await fx.pending()).toEqual([]);
        const record = await fx.record();
        expect(record.map((e) => e.kind)).toEqual([
          'message.received',
          'run.started',
          'message.received',
          'steering.queued',
          'message.received',
          'steering.queued',
        ]);
        expect(record[3]).toMatchObject({ seq: 4, kind: 'steering.queued', run: runId, seqs: [3] });
        expect(record[5]).toMatchObject({ seq: 6, kind: 'steering.queued', run: runId, seqs: [5] });
        expect(await dispatch.status(CID)).toMatchObject({ steeringDepth: 2, pendingDepth: 0, effectivePolicy: 'steer' });
      });
    });

    describe.each(['followup', 'collect'] as const)('with policy %s', (policy) => {
      it('puts the message on pending for a successor run', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: policy });
        expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'pending', seq: 3, runId, depth: 1, reason: 'policy' });
        expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'pending', seq: 4, runId, depth: 2, reason: 'policy' });

        expect(await fx.pending()).toEqual([3, 4]);
        expect(await fx.steering(runId)).toEqual([]);
        expect(await fx.kinds()).toEqual(['message.received', 'run.started', 'message.received', 'message.received']);
        expect((await fx.runRecord(runId)).stop).toBeUndefined();
        expect(await dispatch.status(CID)).toMatchObject({ steeringDepth: 0, pendingDepth: 2, effectivePolicy: policy });
      });
    });

    describe.each(['interrupt', 'supersede'] as const)('with policy %s', (policy) => {
      it('asks the run to stop, records run.control, publishes on the control channel and keeps the message urgent', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: policy });
        const sub = await fx.subscribeControl();

        expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'interrupting', seq: 3, runId, stop: policy });

        const published = await sub.waitFor();
        expect(published).toEqual({ conversation: CID, run: runId, kind: policy });
        const run = await fx.runRecord(runId);
        expect(run.stop).toBe(policy);
        expect(run.urgent).toBe('3');
        expect(run.state).toBe('running');
        const record = await fx.record();
        expect(record.map((e) => e.kind)).toEqual(['message.received', 'run.started', 'message.received', 'run.control']);
        expect(record[3]).toMatchObject({ seq: 4, kind: 'run.control', run: runId, seqs: [3], control: policy });
        expect(await fx.pending()).toEqual([]);
        expect(await fx.steering(runId)).toEqual([]);
        expect(await dispatch.status(CID)).toMatchObject({ activeRunId: runId, stop: policy });
      });

      it('queues a second message behind the first without a second stop request', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: policy });
        await dispatch.ingest(fx.message(1)); // seq 3, run.control seq 4
        expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'interrupting', seq: 5, runId, stop: policy });

        expect((await fx.runRecord(runId)).urgent).toBe('3,5');
        expect((await fx.kinds()).filter((k) => k === 'run.control')).toHaveLength(1);
      });

      it('reports the run’s actual stop kind when /stop came first', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: policy });
        await dispatch.requestStop(fx.source(1), 'stop');
        const r = expectKind(await dispatch.ingest(fx.message(1)), 'interrupting');
        expect((await fx.runRecord(runId)).stop).toBe('stop');
        expect(r.stop as string).toBe('stop');
      });

      it('keeps the first stop kind when a different one was requested first', async () => {
        const { dispatch, runId } = await fx.running({ defaultPolicy: policy });
        const other = policy === 'interrupt' ? 'supersede' : 'interrupt';
        await dispatch.ingest(fx.message(1), { policy: other });
        expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'interrupting', seq: 5, runId, stop: other });
        expect((await fx.runRecord(runId)).stop).toBe(other);
      });
    });
  });
});
