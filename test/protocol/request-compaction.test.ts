import { describe, expect, it } from 'vitest';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('requestCompaction (/compact)', () => {
  const fx = useProtocolFixture();

  describe('when the conversation is idle', () => {
    it('creates a compaction run of its own, with no inputs, and makes it active', async () => {
      const dispatch = fx.dispatch();
      const runs = fx.runs();
      const r = await dispatch.requestCompaction(fx.source(1), { runId: 'run-compact' });
      expect(r).toEqual({ kind: 'new-run', seq: 1, runId: 'run-compact' });
      expect(await dispatch.status(CID)).toMatchObject({ activeRunId: 'run-compact', runState: 'queued', compactionRequestedSeq: 1 });
      const acquired = await runs.acquire(CID, 'run-compact', 'w1');
      expect(acquired).toMatchObject({ inputs: [], cause: 'compact' });
      expect((await fx.record()).map((e) => e.kind)).toEqual(['command.received', 'run.started']);
    });
  });

  describe('when a run is running', () => {
    it('flags the request for the run and creates no run', async () => {
      const { dispatch, runId } = await fx.running();
      const r = await dispatch.requestCompaction(fx.source(1));
      expect(r).toMatchObject({ kind: 'requested', runId });
      expect(await dispatch.status(CID)).toMatchObject({ activeRunId: runId, compactionRequestedSeq: r.seq });
    });
  });

  it('dedupes a repeated command', async () => {
    const dispatch = fx.dispatch();
    const first = await dispatch.requestCompaction(fx.source(1));
    expect(await dispatch.requestCompaction(fx.source(1))).toEqual({ kind: 'duplicate', seq: first.seq });
    expect(await fx.recordLength()).toBe(1);
  });

  it('refuses a bad run id and writes nothing', async () => {
    const dispatch = fx.dispatch();
    await expect(dispatch.requestCompaction(fx.source(1), { runId: 'bad:id' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(await fx.allKeys()).toEqual([]);
  });
});

describe('a compaction entry', () => {
  const fx = useProtocolFixture();

  it('clears a /compact requested before it, so /status no longer shows it pending', async () => {
    const { dispatch, run } = await fx.running();
    const req = await dispatch.requestCompaction(fx.source(1));
    expect((await dispatch.status(CID)).compactionRequestedSeq).toBe(req.seq);
    await fx.state().commitCompaction(run, {
      checkpoint: { key: 'runner.compaction.checkpoint', value: { summary: 's' }, expect: { kind: 'absent' } },
      entry: { v: 1, kind: 'compaction', at: 1, run: run.runId, covers_until: 1, tokens_before: 100, tokens_after: 10, summarizer: 'fallback' },
      compactRequestedSeq: req.seq,
    });
    expect((await dispatch.status(CID)).compactionRequestedSeq).toBe(0);
  });

  it('is written with its checkpoint only: a runner may not append one on its own', async () => {
    const { runs, run } = await fx.running();
    await expect(
      runs.append(run, { v: 1, kind: 'compaction', at: 1, run: run.runId, covers_until: 1, tokens_before: 100, tokens_after: 10, summarizer: 'fallback' }),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('keeps a request when a model step is appended', async () => {
    const { dispatch, runs, run } = await fx.running();
    const req = await dispatch.requestCompaction(fx.source(1));
    await runs.append(run, { v: 1, kind: 'model.step', at: 1, run: run.runId, token: run.token, step: 0, messages: [] });
    expect((await dispatch.status(CID)).compactionRequestedSeq).toBe(req.seq);
  });
});

describe('pullAtBoundary', () => {
  const fx = useProtocolFixture();

  it('reports a pending /compact with the steering, in the same call', async () => {
    const { dispatch, runs, run } = await fx.running();
    expect(await runs.pullAtBoundary(run)).toEqual({ messages: [], compactionRequestedSeq: 0 });
    const steered = await dispatch.ingest(fx.message(1));
    const req = await dispatch.requestCompaction(fx.source(2));
    const pulled = await runs.pullAtBoundary(run);
    expect(pulled.messages.map((e) => e.seq)).toEqual([steered.seq]);
    expect(pulled.compactionRequestedSeq).toBe(req.seq);
  });
});
