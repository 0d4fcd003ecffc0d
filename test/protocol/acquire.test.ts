/** acquire: queued -> running with a fencing token and a lease; takeover once the lease expires. */
import { describe, expect, it } from 'vitest';
import { LeaseHeldError, RunEndedError, RunNotFoundError } from '../../src/errors.js';
import { waitFor } from '../../testing/wait.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('acquire', () => {
  const fx = useProtocolFixture();

  describe('when the run is queued', () => {
    it('takes every message that joined it, in order, also after a backlog of 3 000 joins', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      for (let i = 2; i <= 3000; i += 100) {
        const joined = await Promise.all(Array.from({ length: 100 }, (_, j) => d.ingest(fx.message(i + j))));
        expect(joined.every((r) => r.kind === 'joined')).toBe(true);
      }
      const run = await fx.runs().acquire(CID, first.runId, 'host-a/1');
      expect(run.inputs).toEqual(Array.from({ length: 3001 }, (_, i) => i + 1));
    });

    it("takes an interrupting successor's inputs: only the message that interrupted", async () => {
      const d = fx.dispatch();
      const runs = fx.runs();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      const acquired = await runs.acquire(CID, first.runId, 'host-a/1');
      const waiting = await d.ingest(fx.message(2), { policy: 'collect' }); // waits in pending
      const urgent = await d.ingest(fx.message(3), { policy: 'interrupt' });
      expect(urgent.kind).toBe('interrupting');
      const fin = await runs.finish({ conversationId: CID, runId: first.runId, token: acquired.token }, 'interrupted');
      if (fin.kind !== 'ended' || !fin.successor) throw new Error('expected a successor');
      expect(fin.successor.inputs).toEqual([urgent.seq]);

      expect((await runs.acquire(CID, fin.successor.runId, 'host-a/1')).inputs).toEqual([urgent.seq]);
      expect(await fx.pending()).toEqual([waiting.seq]);
      // The ended run's inputs key is gone: only acquire reads it, and the run is never acquired again.
      expect(await fx.redis.exists(fx.keys().inputs(first.runId))).toBe(0);
    });

    it('makes it running with token 1, attempt 1, its inputs and a lease on the Redis clock', async () => {
      const d = fx.dispatch();
      const runs = fx.runs({ leaseMs: 10_000 });
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      expectKind(await d.ingest(fx.message(2)), 'joined');

      const before = await fx.redisTime();
      const run = await runs.acquire(CID, first.runId, 'host-a/1');
      const after = await fx.redisTime();

      expect(run).toEqual({
        conversationId: CID,
        runId: first.runId,
        token: 1,
        attempt: 1,
        inputs: [1, 2],
        stop: undefined,
        leaseUntilMs: expect.any(Number),
        cause: 'ingest',
        failures: 0,
      });
      expect(run.leaseUntilMs).toBeGreaterThanOrEqual(before + 10_000);
      expect(run.leaseUntilMs).toBeLessThanOrEqual(after + 10_000);

      expect(await fx.runRecord(first.runId)).toMatchObject({ state: 'running', token: '1', attempt: '1', owner: 'host-a/1' });
      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'message.received', 'run.started']);
      expect(record[2]).toMatchObject({ seq: 3, kind: 'run.started', run: first.runId, attempt: 1, token: 1, owner: 'host-a/1', inputs: [1, 2] });
      expect(await d.status(CID)).toMatchObject({
        activeRunId: first.runId,
        runState: 'running',
        attempt: 1,
        owner: 'host-a/1',
        leaseUntilMs: run.leaseUntilMs,
      });
    });

    it('with reads: returns the input entries and the state and meta fields asked for, read in the same call, unset ones undefined', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      expectKind(await d.ingest(fx.message(2)), 'joined');
      const k = fx.keys();
      await fx.redis.hset(k.state, 'note', '"n"');
      await fx.redis.hset(k.meta, 'model', 'fast');

      const run = await fx.runs().acquire(CID, first.runId, 'host-a/1', undefined, { state: ['missing', 'note'], meta: ['model', 'reset_seq'] });
      expect(run.inputs).toEqual([1, 2]);
      expect(run.read!.inputs!.map((e) => [e.seq, e.kind])).toEqual([
        [1, 'message.received'],
        [2, 'message.received'],
      ]);
      expect(run.read!.inputs![1]).toEqual((await fx.record())[1]);
      expect(run.read!.state).toEqual([undefined, '"n"']);
      expect(run.read!.meta).toEqual(['fast', undefined]);
    });

    it('with reads: more than 256 inputs are left to the caller (the script reads at most 256 entries); the fields are read still', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      await Promise.all(Array.from({ length: 256 }, (_, i) => d.ingest(fx.message(i + 2))));
      await fx.redis.hset(fx.keys().meta, 'model', 'fast');
      const run = await fx.runs().acquire(CID, first.runId, 'host-a/1', undefined, { state: [], meta: ['model'] });
      expect(run.inputs).toHaveLength(257);
      expect(run.read).toEqual({ state: [], meta: ['fast'] });
    });

    it('with reads: an input whose entry is gone from the record throws RecordError naming its seq', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      await fx.redis.xdel(fx.keys().log, '1-0');
      await expect(fx.runs().acquire(CID, first.runId, 'host-a/1', undefined, { state: [], meta: [] })).rejects.toThrow(/record entry 1 is missing/);
    });

    it('reports a stop requested before the run started', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      await d.requestStop(fx.source(1), 'stop');
      expect((await fx.runs().acquire(CID, first.runId, 'w')).stop).toBe('stop');
    });
  });

  describe('when another worker holds a live lease', () => {
    it('refuses with LeaseHeldError carrying the lease expiry and writes nothing', async () => {
      const { runs, run, runId } = await fx.running({ leaseMs: 30_000 });
      const before = await fx.snapshot();

      const err = await runs.acquire(CID, runId, 'worker-2').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(LeaseHeldError);
      expect((err as LeaseHeldError).code).toBe('LEASE_HELD');
      expect((err as LeaseHeldError).leaseUntilMs).toBe(run.leaseUntilMs);
      expect(await fx.snapshot()).toEqual(before);
    });

    it('refuses the same owner too while its lease is live', async () => {
      const { runs, runId } = await fx.running();
      await expect(runs.acquire(CID, runId, 'worker-1')).rejects.toBeInstanceOf(LeaseHeldError);
    });

    it('keeps refusing after a heartbeat extended the lease', async () => {
      const { dispatch, runs, run, runId } = await fx.running({}, CID, 200);
      const hb = await runs.heartbeat(run, 30_000);
      expect(hb.stop).toBeUndefined();
      expect(hb.leaseUntilMs).toBeGreaterThan(run.leaseUntilMs);
      expect((await dispatch.status(CID)).leaseUntilMs).toBe(hb.leaseUntilMs);
      await expect(runs.acquire(CID, runId, 'worker-2')).rejects.toBeInstanceOf(LeaseHeldError);
    });
  });

  describe('when many workers race to acquire the same queued run', () => {
    it('lets exactly one win with token 1; the others get LeaseHeldError', async () => {
      const first = expectKind(await fx.dispatch().ingest(fx.message(1)), 'new-run');
      const workers = fx.connections(4).map((c) => fx.runs({}, c));
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => workers[i % 4]!.acquire(CID, first.runId, `worker-${i}`).catch((e: unknown) => e)),
      );
      const won = outcomes.filter((o) => !(o instanceof Error));
      expect(won).toHaveLength(1);
      expect(won[0]).toMatchObject({ token: 1, attempt: 1, inputs: [1] });
      expect(outcomes.filter((o) => o instanceof LeaseHeldError)).toHaveLength(19);
      expect((await fx.kinds()).filter((k) => k === 'run.started')).toHaveLength(1);
    });
  });

  describe('when the lease has expired', () => {
    it('lets another owner take the run over with token 2 and attempt 2', async () => {
      const { dispatch, runs, runId } = await fx.running({}, CID, 50);
      await waitFor(async () => (await fx.redisTime()) > (await dispatch.status(CID)).leaseUntilMs, 2000, 'lease expiry on the Redis clock');

      const taken = await runs.acquire(CID, runId, 'worker-2', 30_000);
      expect(taken).toMatchObject({ runId, token: 2, attempt: 2, inputs: [1], stop: undefined });
      expect(await fx.runRecord(runId)).toMatchObject({ state: 'running', token: '2', attempt: '2', owner: 'worker-2' });
      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'run.started', 'run.started']);
      expect(record[2]).toMatchObject({ kind: 'run.started', run: runId, attempt: 2, token: 2, owner: 'worker-2', inputs: [1] });
      expect(await dispatch.status(CID)).toMatchObject({ activeRunId: runId, attempt: 2, owner: 'worker-2' });
    });
  });

  describe('when the run does not exist', () => {
    it('refuses with RunNotFoundError and writes no key', async () => {
      const err = await fx
        .runs()
        .acquire(CID, 'rnothere1', 'w')
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RunNotFoundError);
      expect((err as RunNotFoundError).code).toBe('RUN_NOT_FOUND');
      expect(await fx.allKeys()).toEqual([]);
    });
  });

  describe('when the run has ended', () => {
    it('refuses with RunEndedError and writes nothing', async () => {
      const { runs, run, runId } = await fx.running();
      await runs.finish(run, 'completed');
      const before = await fx.snapshot();

      const err = await runs.acquire(CID, runId, 'worker-2').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RunEndedError);
      expect((err as RunEndedError).code).toBe('RUN_ENDED');
      expect(await fx.snapshot()).toEqual(before);
    });
  });
});
