/**
 * An interrupting message runs next and alone: the successor finish creates
 * for it takes only the messages that interrupted, never the ordinary
 * messages that were waiting in pending; those get a successor of their own
 * (by the policy) when the interrupting run ends. Every message is the input
 * of exactly one run.
 */
import { describe, expect, it } from 'vitest';
import type { Dispatch, FinishResult, IngestResult, InputPolicy, Runs } from '../../src/protocol/index.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

/** Acquires and completes runs from `runId` on until the conversation is idle; returns each run's inputs, in run order. */
async function drain(runs: Runs, runId: string | undefined, conversationId = CID): Promise<number[][]> {
  const order: number[][] = [];
  let worker = 0;
  while (runId) {
    const run = await runs.acquire(conversationId, runId, `worker-${++worker}`);
    order.push(run.inputs);
    const fin = await runs.finish(run, 'completed');
    if (fin.kind !== 'ended') throw new Error(`run ${runId} got steering back: ${JSON.stringify(fin)}`);
    runId = fin.successor?.runId;
  }
  return order;
}

const successorOf = (fin: FinishResult) => {
  if (fin.kind !== 'ended' || !fin.successor) throw new Error(`expected a successor, got ${JSON.stringify(fin)}`);
  return fin.successor;
};

describe('interrupting messages run alone', () => {
  const fx = useProtocolFixture();

  describe.each(['interrupt', 'supersede'] as const)('with policy %s', (policy) => {
    const outcome = policy === 'interrupt' ? 'interrupted' : 'superseded';

    it('gives the interrupting message a successor of its own, then answers the followup messages one by one', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'followup' });
      const waiting: number[] = [];
      for (const n of [1, 2]) waiting.push(expectKind(await dispatch.ingest(fx.message(n)), 'pending').seq);
      const urgent = expectKind(await dispatch.ingest(fx.message(3), { policy }), 'interrupting');

      const next = successorOf(await runs.finish(run, outcome));
      expect(next.inputs).toEqual([urgent.seq]);
      expect(await fx.pending()).toEqual(waiting);

      // The conversation's current policy (the last ingest's) decides how the rest is taken.
      await dispatch.setPolicy(fx.source(1), 'followup');
      expect(await drain(runs, next.runId)).toEqual([[urgent.seq], [waiting[0]], [waiting[1]]]);
      expect(await fx.pending()).toEqual([]);
    });

    it('keeps every message that interrupted the same run together, apart from the collected ones', async () => {
      const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'collect' });
      const waiting = expectKind(await dispatch.ingest(fx.message(1)), 'pending').seq;
      const u1 = expectKind(await dispatch.ingest(fx.message(2), { policy }), 'interrupting').seq;
      const u2 = expectKind(await dispatch.ingest(fx.message(3), { policy }), 'interrupting').seq;

      const next = successorOf(await runs.finish(run, outcome));
      expect(next.inputs).toEqual([u1, u2]);
      expect(await drain(runs, next.runId)).toEqual([[u1, u2], [waiting]]);
    });
  });

  it('runs a message that came after /stop alone, ahead of the collected ones', async () => {
    const { dispatch, runs, run } = await fx.running({ defaultPolicy: 'collect' });
    const waiting = expectKind(await dispatch.ingest(fx.message(1)), 'pending').seq;
    await dispatch.requestStop(fx.source(1), 'stop');
    const urgent = expectKind(await dispatch.ingest(fx.message(2), { policy: 'interrupt' }), 'interrupting');
    expect(urgent.stop).toBe('stop');

    const next = successorOf(await runs.finish(run, 'stopped'));
    expect(next.inputs).toEqual([urgent.seq]);
    expect(await drain(runs, next.runId)).toEqual([[urgent.seq], [waiting]]);
  });

  it('ends with no successor when nothing interrupted and nothing waits', async () => {
    const { runs, run } = await fx.running({ defaultPolicy: 'interrupt' });
    expect(await runs.finish(run, 'completed')).toEqual({ kind: 'ended', successor: undefined });
  });

  describe("while the interrupting message's run is still queued", () => {
    async function queuedUrgent(dispatch: Dispatch, runs: Runs, run: Awaited<ReturnType<Runs['acquire']>>) {
      const waiting = expectKind(await dispatch.ingest(fx.message(1), { policy: 'collect' }), 'pending').seq;
      const urgent = expectKind(await dispatch.ingest(fx.message(2), { policy: 'interrupt' }), 'interrupting').seq;
      const next = successorOf(await runs.finish(run, 'interrupted'));
      expect(next.inputs).toEqual([urgent]);
      return { waiting, urgent, next };
    }

    it.each(['steer', 'collect'] as const)('a %s message queues behind the waiting ones instead of joining it', async (p: InputPolicy) => {
      const { dispatch, runs, run } = await fx.running();
      const { waiting, urgent, next } = await queuedUrgent(dispatch, runs, run);

      const later = await dispatch.ingest(fx.message(3), { policy: p });
      expect(later).toMatchObject({ kind: 'pending', runId: next.runId });
      expect(await fx.inputs(next.runId)).toEqual([urgent]);
      expect(await drain(runs, next.runId)).toEqual([[urgent], [waiting, later.seq]]);
    });

    it('another interrupting message joins it and runs with it, still ahead of the waiting ones', async () => {
      const { dispatch, runs, run } = await fx.running();
      const { waiting, urgent, next } = await queuedUrgent(dispatch, runs, run);

      const again = expectKind(await dispatch.ingest(fx.message(3), { policy: 'interrupt' }), 'joined');
      expect(again.runId).toBe(next.runId);
      expect(await drain(runs, next.runId)).toEqual([[urgent, again.seq], [waiting]]);
    });

    it('a message still joins a queued run when nothing waits in pending', async () => {
      const { dispatch, runs, run } = await fx.running();
      const urgent = expectKind(await dispatch.ingest(fx.message(1), { policy: 'interrupt' }), 'interrupting').seq;
      const next = successorOf(await runs.finish(run, 'interrupted'));
      const joined = expectKind(await dispatch.ingest(fx.message(2), { policy: 'collect' }), 'joined');
      expect(joined.runId).toBe(next.runId);
      expect(await drain(runs, next.runId)).toEqual([[urgent, joined.seq]]);
    });
  });

  describe('when ordinary and interrupting messages race a finish (100 conversations)', () => {
    it('answers each message in exactly one run and never merges an interrupting message with a waiting one', async () => {
      const [setupConn, finishConn, ...ingestConns] = fx.connections(6);
      const setupDispatch = fx.dispatch({}, setupConn);
      const setupRuns = fx.runs({}, setupConn);
      const finisher = fx.runs({}, finishConn);
      const ingesters = ingestConns.map((c) => fx.dispatch({}, c));
      const problems: string[] = [];

      async function conversation(i: number): Promise<void> {
        const cid = `telegram:alone${i}`;
        const first = expectKind(await setupDispatch.ingest(fx.message(`a${i}`, { conversationId: cid })), 'new-run');
        const run = await setupRuns.acquire(cid, first.runId, 'worker-0');
        // Ten messages, every third one interrupting, each on one of five sockets, racing the finish.
        const results = await Promise.all([
          finisher.finish(run, 'completed'),
          ...Array.from({ length: 10 }, (_, j) =>
            ingesters[j % ingesters.length]!.ingest(fx.message(`m${i}-${j}`, { conversationId: cid }), { policy: j % 3 === 2 ? 'interrupt' : 'collect' }),
          ),
        ]);
        const fin = results[0] as FinishResult;
        const ingested = results.slice(1) as IngestResult[];
        const urgent = new Set(ingested.filter((r) => r.kind === 'interrupting').map((r) => r.seq));
        const waited = new Set(ingested.filter((r) => r.kind === 'pending').map((r) => r.seq));

        const order: number[][] = [[first.seq]];
        if (fin.kind === 'continue') throw new Error('nothing was steered: finish cannot continue');
        if (fin.successor) order.push(...(await drain(setupRuns, fin.successor.runId, cid)));
        for (const r of ingested) {
          if (r.kind !== 'new-run') continue;
          order.push(...(await drain(setupRuns, r.runId, cid)));
        }

        const all = order.flat();
        const expected = [first.seq, ...ingested.map((r) => r.seq)].sort((a, b) => a - b);
        if (JSON.stringify([...all].sort((a, b) => a - b)) !== JSON.stringify(expected)) {
          problems.push(`${cid}: runs took ${JSON.stringify(order)}, messages were ${JSON.stringify(expected)}`);
        }
        for (const inputs of order) {
          if (inputs.some((s) => urgent.has(s)) && inputs.some((s) => waited.has(s))) problems.push(`${cid}: run merged ${JSON.stringify(inputs)}`);
        }
      }

      for (let i = 0; i < 100; i += 10) await Promise.all(Array.from({ length: 10 }, (_, j) => conversation(i + j)));
      expect(problems).toEqual([]);
    });
  });
});
