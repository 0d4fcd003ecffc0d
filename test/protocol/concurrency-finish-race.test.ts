/**
 * The race LangBot loses: a message arrives while the run finishes. Finish and
 * ingest run at once on different connections; the message must land in exactly
 * one place: handed back to the finishing run, or the input of the next run.
 */
import { describe, expect, it } from 'vitest';
import type { FinishResult, IngestResult } from '../../src/protocol/index.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const ITERATIONS = 1000;
const BATCH = 50;

describe('finish racing ingest', () => {
  const fx = useProtocolFixture();

  describe(`when a running run finishes completed while a new message arrives (${ITERATIONS}×)`, () => {
    it('hands the message back or gives it to the next run, never both, never neither', async () => {
      const [setupConn, finishConn, ingestConn] = fx.connections(3);
      const setupDispatch = fx.dispatch({}, setupConn);
      const setupRuns = fx.runs({}, setupConn);
      const finisher = fx.runs({}, finishConn);
      const ingester = fx.dispatch({}, ingestConn);

      const problems: string[] = [];
      const tally = { handedBack: 0, nextRun: 0 };

      async function iteration(i: number): Promise<void> {
        const cid = `telegram:race${i}`;
        const first = await setupDispatch.ingest(fx.message(`a${i}`, { conversationId: cid }));
        if (first.kind !== 'new-run') throw new Error(`iteration ${i}: first ingest ${first.kind}`);
        const run = await setupRuns.acquire(cid, first.runId, 'worker-1');

        // Alternate which call is issued first; each goes out on its own socket.
        const late = fx.message(`b${i}`, { conversationId: cid });
        let fin: FinishResult;
        let ing: IngestResult;
        if (i % 2 === 0) [fin, ing] = await Promise.all([finisher.finish(run, 'completed'), ingester.ingest(late)]);
        else [ing, fin] = await Promise.all([ingester.ingest(late), finisher.finish(run, 'completed')]);

        const places: string[] = [];
        if (fin.kind === 'continue') {
          if (fin.messages.some((e) => e.seq === ing.seq)) places.push('continue');
          if (fin.messages.length !== 1) problems.push(`iteration ${i}: continue with ${fin.messages.length} messages`);
          const again = await finisher.finish(run, 'completed');
          if (again.kind !== 'ended' || again.successor) problems.push(`iteration ${i}: second finish ${JSON.stringify(again)}`);
        } else if (fin.successor?.inputs.includes(ing.seq)) {
          places.push('successor');
        }
        if (ing.kind === 'new-run' || ing.kind === 'joined') {
          const next = await setupRuns.acquire(cid, ing.runId, 'worker-2');
          if (next.inputs.includes(ing.seq)) places.push('next-run');
        } else if (ing.kind !== 'steered') {
          problems.push(`iteration ${i}: ingest answered ${ing.kind}`);
        }

        if (places.length !== 1) problems.push(`iteration ${i}: message ${ing.seq} found in [${places.join(', ')}] (${ing.kind} / ${fin.kind})`);
        else if (places[0] === 'continue') tally.handedBack++;
        else tally.nextRun++;

        // Nothing stranded: no steering left on the first run, nothing pending.
        const k = fx.keys(cid);
        const [steer, pending] = await Promise.all([setupConn!.llen(k.steer(first.runId)), setupConn!.llen(k.pending)]);
        if (steer !== 0 || pending !== 0) problems.push(`iteration ${i}: steering ${steer}, pending ${pending} left`);
      }

      for (let start = 0; start < ITERATIONS; start += BATCH) {
        await Promise.all(Array.from({ length: Math.min(BATCH, ITERATIONS - start) }, (_, j) => iteration(start + j)));
      }

      expect(problems).toEqual([]);
      expect(tally.handedBack + tally.nextRun).toBe(ITERATIONS);
      console.log(`finish race: handed back ${tally.handedBack}, next run ${tally.nextRun}`);
    });
  });
});
