/** finish: continue with late steering, or end the run and hand every waiting message to a successor. */
import { describe, expect, it } from 'vitest';
import { InvalidInputError, LeaseHeldError, RunEndedError } from '../../src/errors.js';
import type { InputPolicy } from '../../src/protocol/index.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('finish', () => {
  const fx = useProtocolFixture();

  describe('when an operator abandons the run', () => {
    it('refuses while the lease is live, writing nothing, and ends the run once it ran out', async () => {
      const { runs, run, runId } = await fx.running();
      const before = await fx.kinds();
      await expect(runs.finish(run, 'failed', { reason: 'abandoned', abandon: true })).rejects.toBeInstanceOf(LeaseHeldError);
      expect(await fx.runRecord(runId)).toMatchObject({ state: 'running' });
      expect(await fx.kinds()).toEqual(before);

      await fx.redis.hset(fx.keys().run(runId), 'lease_until', '1');
      expect(await runs.finish(run, 'failed', { reason: 'abandoned', abandon: true })).toEqual({ kind: 'ended', successor: undefined });
      expect(await fx.runRecord(runId)).toMatchObject({ state: 'ended', outcome: 'failed' });
    });
  });

  describe('when the run completed and steering is waiting', () => {
    it('hands the steering back as continue, records steering.injected follow_up, and keeps the run running', async () => {
      const { dispatch, runs, run, runId } = await fx.running();
      await dispatch.ingest(fx.message(1)); // seq 3 (+ steering.queued 4)
      await dispatch.ingest(fx.message(2)); // seq 5 (+ steering.queued 6)

      const fin = await runs.finish(run, 'completed');
      expect(fin.kind).toBe('continue');
      if (fin.kind !== 'continue') return;
      expect(fin.messages.map((e) => [e.seq, e.kind])).toEqual([
        [3, 'message.received'],
        [5, 'message.received'],
      ]);

      expect(await fx.runRecord(runId)).toMatchObject({ state: 'running', token: '1' });
      expect(await fx.redis.get(fx.keys().active)).toBe(runId);
      expect(await fx.steering(runId)).toEqual([]);
      const record = await fx.record();
      expect(record.map((e) => e.kind).slice(-1)).toEqual(['steering.injected']);
      expect(record.at(-1)).toMatchObject({ seq: 7, kind: 'steering.injected', run: runId, seqs: [3, 5], follow_up: true });

      // Nothing left: the next finish ends the run.
      expect(await runs.finish(run, 'completed')).toEqual({ kind: 'ended', successor: undefined });
      expect(await fx.kinds()).toEqual([
        'message.received',
        'run.started',
        'message.received',
        'steering.queued',
        'message.received',
        'steering.queued',
        'steering.injected',
        'run.ended',
      ]);
    });

    it('hands back only the first message in mode one', async () => {
      const { dispatch, runs, run, runId } = await fx.running();
      await dispatch.ingest(fx.message(1));
      await dispatch.ingest(fx.message(2));
      const fin = await runs.finish(run, 'completed', { mode: 'one' });
      expect(fin.kind === 'continue' && fin.messages.map((e) => e.seq)).toEqual([3]);
      expect(await fx.steering(runId)).toEqual([5]);
    });
  });

  describe('when the run completed and nothing is waiting', () => {
    it('ends the run, clears active and records run.ended', async () => {
      const { dispatch, runs, run, runId } = await fx.running();

      expect(await runs.finish(run, 'completed', { reason: 'done' })).toEqual({ kind: 'ended', successor: undefined });

      expect(await fx.runRecord(runId)).toMatchObject({ state: 'ended', outcome: 'completed', reason: 'done' });
      expect(await fx.redis.exists(fx.keys().active)).toBe(0);
      expect(await dispatch.status(CID)).toMatchObject({ activeRunId: undefined, runState: undefined, pendingDepth: 0 });
      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'run.started', 'run.ended']);
      expect(record[2]).toEqual({
        seq: 3,
        v: 1,
        kind: 'run.ended',
        at: expect.any(Number),
        run: runId,
        attempt: 1,
        token: 1,
        outcome: 'completed',
        reason: 'done',
      });
    });

    it('lets the next message start a new run', async () => {
      const { dispatch, runs, run, runId } = await fx.running();
      await runs.finish(run, 'completed');
      const next = expectKind(await dispatch.ingest(fx.message(1)), 'new-run');
      expect(next.runId).not.toBe(runId);
      expect(await fx.inputs(next.runId)).toEqual([next.seq]);
    });
  });

  describe.each(['failed', 'interrupted', 'superseded', 'stopped'] as const)('when the run ends %s with unpulled steering', (outcome) => {
    it('requeues the steering in order ahead of pending, records steering.requeued, and creates the successor', async () => {
      const { dispatch, runs, run, runId } = await fx.running({ steeringCap: 2 });
      expectKind(await dispatch.ingest(fx.message(1)), 'steered'); // 3
      expectKind(await dispatch.ingest(fx.message(2)), 'steered'); // 5
      expectKind(await dispatch.ingest(fx.message(3)), 'pending'); // 7, overflow

      const fin = await runs.finish(run, outcome, { reason: 'boom', successorId: 'run-succ' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-succ', inputs: [3, 5, 7] } });

      const record = await fx.record();
      expect(record.slice(-2)).toEqual([
        { seq: 9, v: 1, kind: 'run.ended', at: expect.any(Number), run: runId, attempt: 1, token: 1, outcome, reason: 'boom' },
        { seq: 10, v: 1, kind: 'steering.requeued', at: expect.any(Number), run: runId, seqs: [3, 5] },
      ]);
      expect(await fx.steering(runId)).toEqual([]);
      expect(await fx.pending()).toEqual([]);
      expect(await fx.runRecord('run-succ')).toMatchObject({
        id: 'run-succ',
        conversation: CID,
        state: 'queued',
        token: '0',
        attempt: '0',
        cause: 'successor',
      });
      expect(await fx.inputs('run-succ')).toEqual([3, 5, 7]);
      expect(await dispatch.status(CID)).toMatchObject({ activeRunId: 'run-succ', runState: 'queued' });
      expect((await runs.acquire(CID, 'run-succ', 'worker-2')).inputs).toEqual([3, 5, 7]);
    });
  });

  describe('when unpulled steering meets messages already pending', () => {
    it('puts the steering at the front of pending (LPUSH), ahead of the pending messages', async () => {
      const { dispatch, runs, run } = await fx.running({ steeringCap: 1 });
      expectKind(await dispatch.ingest(fx.message(1)), 'steered'); // 3
      expectKind(await dispatch.ingest(fx.message(2)), 'pending'); // 5, overflow
      await dispatch.requestStop(fx.source(1), 'interrupt'); // 7 command, 8 run.control; pull now takes nothing
      expectKind(await dispatch.ingest(fx.message(3)), 'pending'); // 9, behind the overflow

      const fin = await runs.finish(run, 'interrupted', { successorId: 'run-succ' });
      // Unpulled steering (3) goes to the front, ahead of the older pending messages (5, 9).
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-succ', inputs: [3, 5, 9] } });
    });
  });

  describe('when the run completed but a stop was requested', () => {
    it('does not hand steering back; it goes to the successor', async () => {
      const { dispatch, runs, run } = await fx.running();
      await dispatch.ingest(fx.message(1)); // 3
      await dispatch.requestStop(fx.source(1), 'stop');
      expect(await runs.finish(run, 'completed', { successorId: 'run-succ' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-succ', inputs: [3] },
      });
    });
  });

  describe('with policy followup', () => {
    it('gives each pending message its own successor, FIFO, one per finish', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'followup' });
      for (const n of [1, 2, 3]) expectKind(await dispatch.ingest(fx.message(n)), 'pending'); // 3, 4, 5

      expect(await runs.finish(run, 'completed', { successorId: 'run-s1' })).toEqual({ kind: 'ended', successor: { runId: 'run-s1', inputs: [3] } });
      expect(await fx.pending()).toEqual([4, 5]);
      expect(await fx.redis.get(fx.keys().active)).toBe('run-s1');

      const s1 = await runs.acquire(CID, 'run-s1', 'w');
      expect(s1.inputs).toEqual([3]);
      expect(await runs.finish(s1, 'completed', { successorId: 'run-s2' })).toEqual({ kind: 'ended', successor: { runId: 'run-s2', inputs: [4] } });
      expect(await fx.pending()).toEqual([5]);

      const s2 = await runs.acquire(CID, 'run-s2', 'w');
      expect(await runs.finish(s2, 'completed', { successorId: 'run-s3' })).toEqual({ kind: 'ended', successor: { runId: 'run-s3', inputs: [5] } });
      expect(await fx.pending()).toEqual([]);

      const s3 = await runs.acquire(CID, 'run-s3', 'w');
      expect(await runs.finish(s3, 'completed')).toEqual({ kind: 'ended', successor: undefined });
      expect(await fx.redis.exists(fx.keys().active)).toBe(0);
    });

    it('keeps FIFO when a message arrives while the successor is still queued', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'followup' });
      for (const n of [1, 2]) await dispatch.ingest(fx.message(n)); // 3, 4
      await runs.finish(run, 'completed', { successorId: 'run-s1' }); // s1 [3], pending [4]
      await dispatch.ingest(fx.message(3)); // 6 (seq 5 is run.ended)

      // Each message its own run, in arrival order: [3], [4], [6].
      const order: number[][] = [];
      let next: string | undefined = 'run-s1';
      for (let i = 0; next && i < 5; i++) {
        const r = await runs.acquire(CID, next, 'w');
        order.push(r.inputs);
        const fin = await runs.finish(r, 'completed');
        next = fin.kind === 'ended' ? fin.successor?.runId : undefined;
      }
      expect(order).toEqual([[3], [4], [6]]);
    });

    it('follows a /queue collect override set after the messages were queued (takes all pending)', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'followup' });
      for (const n of [1, 2, 3]) expectKind(await dispatch.ingest(fx.message(n)), 'pending'); // 3, 4, 5
      await dispatch.setPolicy(fx.source(1), 'collect'); // 6
      expect(await dispatch.status(CID)).toMatchObject({ policyOverride: 'collect' });
      expect(await runs.finish(run, 'completed', { successorId: 'run-s1' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-s1', inputs: [3, 4, 5] },
      });
    });
  });

  describe('with policy collect', () => {
    it('gives the successor every pending message at once', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'collect' });
      for (const n of [1, 2, 3]) expectKind(await dispatch.ingest(fx.message(n)), 'pending');
      expect(await runs.finish(run, 'completed', { successorId: 'run-s1' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-s1', inputs: [3, 4, 5] },
      });
      expect(await fx.pending()).toEqual([]);
    });
  });

  describe.each(['interrupt', 'supersede'] as const)('with policy %s', (policy) => {
    const outcome = policy === 'interrupt' ? 'interrupted' : 'superseded';

    it('runs the interrupting messages next and alone; requeued steering and older pending get the successor after it', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'steer', steeringCap: 1 });
      expectKind(await dispatch.ingest(fx.message(1)), 'steered'); // 3 (+4 queued)
      expectKind(await dispatch.ingest(fx.message(2)), 'pending'); // 5 (+6 overflow)
      await dispatch.setPolicy(fx.source(1), policy); // 7
      expectKind(await dispatch.ingest(fx.message(3)), 'interrupting'); // 8 (+9 run.control)
      expectKind(await dispatch.ingest(fx.message(4)), 'interrupting'); // 10

      const fin = await runs.finish(run, outcome, { successorId: 'run-next' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-next', inputs: [8, 10] } });
      expect(await fx.pending()).toEqual([3, 5]);

      const next = await runs.acquire(CID, 'run-next', 'worker-1');
      expect(await runs.finish(next, 'completed', { successorId: 'run-after' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-after', inputs: [3, 5] },
      });
      expect(await fx.pending()).toEqual([]);
    });

    it('runs the interrupting message alone, then the collected pending in a successor of its own', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'collect' });
      expectKind(await dispatch.ingest(fx.message(1)), 'pending'); // 3
      expectKind(await dispatch.ingest(fx.message(2), { policy: policy as InputPolicy }), 'interrupting'); // 4

      const fin = await runs.finish(run, outcome, { successorId: 'run-next' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-next', inputs: [4] } });
      const next = await runs.acquire(CID, 'run-next', 'worker-1');
      expect(next.inputs).toEqual([4]);
      expect(await runs.finish(next, 'completed', { successorId: 'run-after' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-after', inputs: [3] },
      });
    });
  });

  describe('when a failed run hands the messages it did not answer to a follow-up (retry)', () => {
    it('puts them at the front of pending, ahead of unpulled steering and older pending; the follow-up takes them all and counts one more failure', async () => {
      const { dispatch, runs, run, runId, firstSeq } = await fx.running({ steeringCap: 1 });
      expectKind(await dispatch.ingest(fx.message(1)), 'steered'); // 3 (+4 queued)
      expect((await runs.pull(run)).map((e) => e.seq)).toEqual([3]); // 5 injected
      expectKind(await dispatch.ingest(fx.message(2)), 'steered'); // 6 (+7 queued), never pulled
      expectKind(await dispatch.ingest(fx.message(3)), 'pending'); // 8 (+9 overflow)

      const fin = await runs.finish(run, 'failed', { reason: 'model API error 500', retry: [firstSeq, 3], successorId: 'run-f1' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-f1', inputs: [firstSeq, 3, 6, 8] } });
      expect((await fx.record()).slice(-2)).toMatchObject([
        { seq: 10, kind: 'run.ended', run: runId, outcome: 'failed' },
        { seq: 11, kind: 'steering.requeued', run: runId, seqs: [firstSeq, 3, 6] },
      ]);
      expect(await fx.pending()).toEqual([]);
      expect(await fx.runRecord('run-f1')).toMatchObject({ state: 'queued', cause: 'successor', failures: '1' });
      const f1 = await runs.acquire(CID, 'run-f1', 'worker-2');
      expect(f1).toMatchObject({ inputs: [firstSeq, 3, 6, 8], cause: 'successor', failures: 1 });

      // It fails too: the next follow-up counts two.
      expect(await runs.finish(f1, 'failed', { retry: f1.inputs, successorId: 'run-f2' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-f2', inputs: [firstSeq, 3, 6, 8] },
      });
      const f2 = await runs.acquire(CID, 'run-f2', 'worker-2');
      expect(f2.failures).toBe(2);
      // A takeover of the follow-up reads the same count.
      await fx.redis.hset(fx.keys().run('run-f2'), 'lease_until', '1');
      expect((await runs.acquire(CID, 'run-f2', 'worker-3')).failures).toBe(2);
    });

    it('gives a successor that is not a follow-up no failures: a run that hands nothing back ends the count', async () => {
      const { dispatch, runs, run, firstSeq } = await fx.running();
      await runs.finish(run, 'failed', { retry: [firstSeq], successorId: 'run-f1' });
      const f1 = await runs.acquire(CID, 'run-f1', 'w');
      expect(f1.failures).toBe(1);
      expectKind(await dispatch.ingest(fx.message(1)), 'steered');
      // Follow-ups used up: the runner hands nothing back; the unpulled message gets a run of its own.
      const fin = await runs.finish(f1, 'failed', { successorId: 'run-next' });
      expect(fin.kind === 'ended' && fin.successor?.inputs).toHaveLength(1);
      expect((await runs.acquire(CID, 'run-next', 'w')).failures).toBe(0);
      expect((await fx.runRecord('run-next')).failures).toBeUndefined();
    });

    it('with policy followup, the follow-up takes every handed-back message at once, and pending waits for the next run', async () => {
      const { dispatch, runs, run, firstSeq } = await fx.running();
      expectKind(await dispatch.ingest(fx.message(1)), 'steered'); // 3
      await runs.pull(run);
      await dispatch.setPolicy(fx.source(1), 'followup');
      const later = expectKind(await dispatch.ingest(fx.message(2)), 'pending');

      expect(await runs.finish(run, 'failed', { retry: [firstSeq, 3], successorId: 'run-f1' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-f1', inputs: [firstSeq, 3] },
      });
      expect(await fx.pending()).toEqual([later.seq]);
    });

    it('when interrupting messages wait, they run first; the handed-back messages wait at the front of pending', async () => {
      const { dispatch, runs, run, firstSeq } = await fx.running();
      const urgent = expectKind(await dispatch.ingest(fx.message(1), { policy: 'interrupt' }), 'interrupting');
      expect(await runs.finish(run, 'failed', { retry: [firstSeq], successorId: 'run-next' })).toEqual({
        kind: 'ended',
        successor: { runId: 'run-next', inputs: [urgent.seq] },
      });
      expect(await fx.pending()).toEqual([firstSeq]);
    });

    it.each(['completed', 'stopped'] as const)('refuses retry seqs with outcome %s and writes nothing', async (outcome) => {
      const { runs, run, runId, firstSeq } = await fx.running();
      const before = await fx.snapshot();
      await expect(runs.finish(run, outcome, { retry: [firstSeq] })).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.snapshot()).toEqual(before);
      expect((await fx.runRecord(runId)).state).toBe('running');
    });
  });

  describe('when the outcome is not one finish knows', () => {
    it('refuses with InvalidInputError and writes nothing', async () => {
      const { runs, run, runId } = await fx.running();
      const before = await fx.snapshot();
      await expect(runs.finish(run, 'exploded' as never)).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.snapshot()).toEqual(before);
      expect((await fx.runRecord(runId)).state).toBe('running');
    });
  });

  describe('when the successor id is not a usable BullMQ job id', () => {
    it('refuses it before anything is written', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'collect' });
      await dispatch.ingest(fx.message(1));
      const before = await fx.snapshot();
      const err = await runs.finish(run, 'completed', { successorId: 'bad:id' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(await fx.snapshot()).toEqual(before);
    });
  });

  describe('when the run already ended', () => {
    it('refuses with RunEndedError', async () => {
      const { runs, run } = await fx.running();
      await runs.finish(run, 'completed');
      await expect(runs.finish(run, 'completed')).rejects.toBeInstanceOf(RunEndedError);
    });
  });
});
