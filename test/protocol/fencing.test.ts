/** After a takeover, every fenced write of the old attempt is refused with StaleRunError and writes nothing. */
import { describe, expect, it } from 'vitest';
import { StaleRunError } from '../../src/errors.js';
import type { ConversationState, RunRef, Runs } from '../../src/protocol/index.js';
import type { RecordEntry } from '../../src/record/entries.js';
import { waitFor } from '../../testing/wait.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const STATE_KEY = 'runner.compaction.checkpoint';

function modelStep(run: RunRef): RecordEntry {
  return { v: 1, kind: 'model.step', at: Date.now(), run: run.runId, token: run.token, step: 0, messages: [{ role: 'assistant', content: 'hi' }] };
}

type FencedCall = (runs: Runs, state: ConversationState, stale: RunRef) => Promise<unknown>;

const CALLS: Array<[string, FencedCall]> = [
  ['heartbeat', (runs, _s, stale) => runs.heartbeat(stale, 30_000)],
  ['append', (runs, _s, stale) => runs.append(stale, modelStep(stale))],
  ['pull all', (runs, _s, stale) => runs.pull(stale, 'all')],
  ['pull one', (runs, _s, stale) => runs.pull(stale, 'one')],
  ['finish completed', (runs, _s, stale) => runs.finish(stale, 'completed')],
  ['finish failed', (runs, _s, stale) => runs.finish(stale, 'failed', { reason: 'boom' })],
  ['finish interrupted', (runs, _s, stale) => runs.finish(stale, 'interrupted')],
  ['state set', (_r, state, stale) => state.set(stale, STATE_KEY, { covers_until: 99 })],
  ['state set with CAS absent', (_r, state, stale) => state.set(stale, 'runner.other', 1, { kind: 'absent' })],
  ['state delete', (_r, state, stale) => state.delete(stale, STATE_KEY)],
];

describe('fencing', () => {
  const fx = useProtocolFixture();

  /** A run taken over by worker-2 after worker-1's lease expired, with steering waiting and state written. */
  async function takenOver() {
    const { dispatch, runs, run: stale, runId } = await fx.running({}, CID, 50);
    const state = fx.state();
    await state.set(stale, STATE_KEY, { covers_until: 1 });
    expectKind(await dispatch.ingest(fx.message(1)), 'steered');
    await waitFor(async () => (await fx.redisTime()) > (await dispatch.status(CID)).leaseUntilMs, 2000, 'lease expiry');
    const current = await runs.acquire(CID, runId, 'worker-2');
    expect(current.token).toBe(2);
    return { dispatch, runs, state, stale, current, runId };
  }

  describe('when another worker took the run over', () => {
    it.each(CALLS)('refuses %s with the old token and writes nothing', async (_name, call) => {
      const { runs, state, stale, runId } = await takenOver();
      const before = await fx.snapshot();
      const recordLength = await fx.recordLength();

      const err = await call(runs, state, stale).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StaleRunError);
      expect((err as StaleRunError).code).toBe('STALE_RUN');

      expect(await fx.recordLength()).toBe(recordLength);
      expect(await fx.steering(runId)).toEqual([3]);
      expect(await state.getRaw(CID, STATE_KEY)).toBe('{"covers_until":1}');
      expect(await fx.snapshot()).toEqual(before);
    });

    it('still accepts the new owner’s token', async () => {
      const { runs, state, current } = await takenOver();
      await state.set(current, STATE_KEY, { covers_until: 2 });
      expect((await runs.pull(current)).map((e) => e.seq)).toEqual([3]);
      expect(await runs.append(current, modelStep(current))).toBeGreaterThan(0);
      expect(await runs.finish(current, 'completed')).toEqual({ kind: 'ended', successor: undefined });
    });

    it('refuses the old token even after the new owner ended the run', async () => {
      const { runs, stale, current } = await takenOver();
      await runs.finish(current, 'failed');
      await expect(runs.heartbeat(stale)).rejects.toBeInstanceOf(StaleRunError);
    });
  });

  describe('when the run was never acquired', () => {
    it('refuses writes with the queued run’s token 0', async () => {
      const first = expectKind(await fx.dispatch().ingest(fx.message(1)), 'new-run');
      const ref = { conversationId: CID, runId: first.runId, token: 0 };
      const before = await fx.snapshot();
      await expect(fx.runs().finish(ref, 'completed')).rejects.toBeInstanceOf(StaleRunError);
      await expect(fx.state().set(ref, STATE_KEY, 1)).rejects.toBeInstanceOf(StaleRunError);
      expect(await fx.snapshot()).toEqual(before);
    });
  });
});
