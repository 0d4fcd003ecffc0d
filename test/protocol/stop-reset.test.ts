/** Control commands: /stop (and interrupt / supersede requests) and /new (reset). */
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors.js';
import type { StopKind } from '../../src/protocol/index.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('requestStop', () => {
  const fx = useProtocolFixture();

  describe('when no run is active', () => {
    it('answers idle and records only the command', async () => {
      const d = fx.dispatch();
      expect(await d.requestStop(fx.source(1), 'stop')).toEqual({ kind: 'idle', seq: 1 });
      const record = await fx.record();
      expect(record).toEqual([
        { seq: 1, v: 1, kind: 'command.received', at: expect.any(Number), updateKey: 'telegram:cmd-1', sender: { id: 'u1' }, command: '/stop' },
      ]);
      expect(await fx.redis.exists(fx.keys().active)).toBe(0);
    });
  });

  describe.each(['stop', 'interrupt', 'supersede'] as const)('when a run is running (%s)', (kind) => {
    it('marks the run, records run.control and publishes on the control channel', async () => {
      const { dispatch, runs, run, runId } = await fx.running();
      const sub = await fx.subscribeControl();

      expect(await dispatch.requestStop(fx.source(1), kind)).toEqual({ kind: 'requested', seq: 3, runId, stop: kind, runState: 'running' });

      expect(await sub.waitFor()).toEqual({ conversation: CID, run: runId, kind });
      expect((await fx.runRecord(runId)).stop).toBe(kind);
      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'run.started', 'command.received', 'run.control']);
      expect(record[2]).toMatchObject({ kind: 'command.received', command: kind === 'stop' ? '/stop' : `/${kind}` });
      expect(record[3]).toMatchObject({ seq: 4, kind: 'run.control', run: runId, seqs: [3], control: kind });
      expect((await runs.heartbeat(run)).stop).toBe(kind);
      expect(await dispatch.status(CID)).toMatchObject({ stop: kind });
    });
  });

  describe('when a stop was already requested', () => {
    it('keeps the first kind and records no second run.control', async () => {
      const { dispatch, runId } = await fx.running();
      await dispatch.requestStop(fx.source(1), 'supersede');
      expect(await dispatch.requestStop(fx.source(2), 'stop')).toEqual({ kind: 'requested', seq: 5, runId, stop: 'supersede', runState: 'running' });
      expect((await fx.runRecord(runId)).stop).toBe('supersede');
      expect((await fx.kinds()).filter((k) => k === 'run.control')).toHaveLength(1);
    });
  });

  describe('when the run is still queued', () => {
    it('marks the queued run so its worker sees the stop at acquire', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      expect(await d.requestStop(fx.source(1), 'stop')).toEqual({ kind: 'requested', seq: 2, runId: first.runId, stop: 'stop', runState: 'queued' });
    });

    it('does not lose a message that arrives after the stop request', async () => {
      const d = fx.dispatch();
      const runs = fx.runs();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      await d.requestStop(fx.source(1), 'stop');
      const late = await d.ingest(fx.message(2));
      expect(late.kind).not.toBe('duplicate');

      // The worker honours the stop it sees at acquire and finishes without running.
      const run = await runs.acquire(CID, first.runId, 'w');
      expect(run.stop).toBe('stop');
      const fin = await runs.finish(run, 'stopped');

      // The late message must still be answered: it is waiting, or it is a successor's input.
      const waiting = [...(fin.kind === 'ended' ? (fin.successor?.inputs ?? []) : []), ...(await fx.pending())];
      expect(waiting).toContain(late.seq);
    });
  });

  describe('when the command update was seen before', () => {
    it('answers duplicate with the original seq and writes nothing', async () => {
      const { dispatch } = await fx.running();
      const first = await dispatch.requestStop(fx.source(1), 'stop');
      const before = await fx.snapshot();
      expect(await dispatch.requestStop(fx.source(1), 'interrupt')).toEqual({ kind: 'duplicate', seq: first.seq });
      expect(await fx.snapshot()).toEqual(before);
    });
  });

  describe('when the input is bad', () => {
    it('refuses an unknown kind and writes no key', async () => {
      await expect(fx.dispatch().requestStop(fx.source(1), 'pause' as StopKind)).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });

    it('refuses a missing sender id and writes no key', async () => {
      const src = { ...fx.source(1), sender: {} as { id: string } };
      await expect(fx.dispatch().requestStop(src, 'stop')).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });
  });
});

describe('reset', () => {
  const fx = useProtocolFixture();

  describe('when no run is active', () => {
    it('records conversation.reset and sets resetSeq', async () => {
      const d = fx.dispatch();
      expect(await d.reset(fx.source(1))).toEqual({ kind: 'reset', seq: 1 });
      expect(await fx.record()).toEqual([
        { seq: 1, v: 1, kind: 'conversation.reset', at: expect.any(Number), updateKey: 'telegram:cmd-1', sender: { id: 'u1' } },
      ]);
      expect(await d.status(CID)).toMatchObject({ resetSeq: 1, activeRunId: undefined });
    });
  });

  describe('when a run is running', () => {
    it('records the reset, sets resetSeq and asks the run to stop', async () => {
      const { dispatch, runId } = await fx.running();
      const sub = await fx.subscribeControl();

      expect(await dispatch.reset(fx.source(1))).toEqual({ kind: 'reset', seq: 3, stoppedRunId: runId });

      expect(await sub.waitFor()).toEqual({ conversation: CID, run: runId, kind: 'stop' });
      expect((await fx.runRecord(runId)).stop).toBe('stop');
      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual(['message.received', 'run.started', 'conversation.reset', 'run.control']);
      expect(record[3]).toMatchObject({ kind: 'run.control', run: runId, seqs: [3], control: 'stop' });
      expect(await dispatch.status(CID)).toMatchObject({ resetSeq: 3, stop: 'stop', activeRunId: runId });
    });

    it('does not record a second run.control when a stop was already requested', async () => {
      const { dispatch, runId } = await fx.running();
      await dispatch.requestStop(fx.source(1), 'interrupt');
      expect(await dispatch.reset(fx.source(2))).toEqual({ kind: 'reset', seq: 5, stoppedRunId: runId });
      expect((await fx.runRecord(runId)).stop).toBe('interrupt');
      expect((await fx.kinds()).filter((k) => k === 'run.control')).toHaveLength(1);
    });
  });

  describe('when the active run is still queued', () => {
    it('does not lose a message that arrives after /new stopped the queued run', async () => {
      const d = fx.dispatch();
      const runs = fx.runs();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      expect(await d.reset(fx.source(1))).toEqual({ kind: 'reset', seq: 2, stoppedRunId: first.runId });
      const late = await d.ingest(fx.message(2));

      const run = await runs.acquire(CID, first.runId, 'w');
      expect(run.stop).toBe('stop');
      const fin = await runs.finish(run, 'stopped');
      const waiting = [...(fin.kind === 'ended' ? (fin.successor?.inputs ?? []) : []), ...(await fx.pending())];
      expect(waiting).toContain(late.seq);
    });
  });

  describe('when the reset update was seen before', () => {
    it('answers duplicate with the original seq and leaves resetSeq alone', async () => {
      const d = fx.dispatch();
      await d.reset(fx.source(1));
      await d.ingest(fx.message(1));
      const before = await fx.snapshot();
      expect(await d.reset(fx.source(1))).toEqual({ kind: 'duplicate', seq: 1 });
      expect(await fx.snapshot()).toEqual(before);
      expect((await d.status(CID)).resetSeq).toBe(1);
    });
  });

  describe('when the input is bad', () => {
    it('refuses an update key with braces and writes no key', async () => {
      await expect(fx.dispatch().reset({ ...fx.source(1), updateKey: 'tg:{x}' })).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });
  });
});

describe('statusCommand', () => {
  const fx = useProtocolFixture();

  it('answers the snapshot once per update, deduping in the same script, and writes only the dedupe key', async () => {
    const { dispatch, runId } = await fx.running();
    const before = await fx.snapshot();
    const first = await dispatch.statusCommand(fx.source(7));
    expect(first).toEqual({ kind: 'status', status: await dispatch.status(CID) });
    expect(first.kind === 'status' && first.status.activeRunId).toBe(runId);
    expect(await dispatch.statusCommand(fx.source(7))).toEqual({ kind: 'duplicate' });
    const after = await fx.snapshot();
    const added = Object.keys(after).filter((k) => !(k in before));
    expect(added).toEqual([fx.keys().dedupe(fx.source(7).updateKey)]);
    expect({ ...after, [added[0]!]: undefined }).toEqual({ ...before, [added[0]!]: undefined });
  });
});
