/** Many hosts ingesting into one idle conversation at once: one run, every message exactly once. */
import { describe, expect, it } from 'vitest';
import type { AcquiredRun, IngestResult } from '../../src/protocol/index.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const MESSAGES = 200;
const CONNECTIONS = 4;

const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);

describe('ingest under concurrency', () => {
  const fx = useProtocolFixture();

  describe(`when ${MESSAGES} distinct messages race into an idle conversation over ${CONNECTIONS} connections`, () => {
    it('creates exactly one run and places every message exactly once (inputs, steering or pending)', async () => {
      const dispatches = fx.connections(CONNECTIONS).map((c) => fx.dispatch({ steeringCap: 50 }, c));
      // A worker on its own connection acquires the run as soon as it exists, so later messages steer or overflow.
      const workerConn = fx.connection();
      const worker = fx.runs({}, workerConn);
      const watcher = fx.dispatch({}, workerConn);
      let acquired: AcquiredRun | undefined;
      const acquire = async () => {
        const deadline = Date.now() + 10_000;
        for (;;) {
          const st = await watcher.status(CID);
          if (st.activeRunId) {
            acquired = await worker.acquire(CID, st.activeRunId, 'worker-1');
            return;
          }
          if (Date.now() > deadline) throw new Error('no run appeared');
          await new Promise((r) => setImmediate(r));
        }
      };

      const ingests = Array.from({ length: MESSAGES }, (_, i) => dispatches[i % CONNECTIONS]!.ingest(fx.message(i)));
      const [results] = await Promise.all([Promise.all(ingests), acquire()]);

      const byKind = (k: IngestResult['kind']) => results.filter((r) => r.kind === k);
      const seqsOf = (rs: IngestResult[]) => rs.map((r) => r.seq);
      const newRuns = byKind('new-run');
      expect(newRuns).toHaveLength(1);
      expect(byKind('duplicate')).toHaveLength(0);
      expect(byKind('interrupting')).toHaveLength(0);
      expect(newRuns.length + byKind('joined').length + byKind('steered').length + byKind('pending').length).toBe(MESSAGES);
      for (const r of byKind('pending')) expect(r).toMatchObject({ reason: 'overflow' });

      console.log('kinds', ['joined','steered','pending'].map((k) => k + ' ' + byKind(k as IngestResult['kind']).length).join(', '));
      const runId = (newRuns[0] as { runId: string }).runId;
      for (const r of results) if (r.kind !== 'duplicate') expect(r.runId).toBe(runId);

      // Exactly one run exists and it is the active one.
      const runKeys = (await fx.allKeys()).filter((k) => k.includes(':run:'));
      expect(runKeys).toEqual([fx.keys().run(runId)]);
      expect(await fx.redis.get(fx.keys().active)).toBe(runId);

      const inputs = await fx.inputs(runId);
      const steering = await fx.steering(runId);
      const pending = await fx.pending();
      // Each place holds exactly the messages whose result said so, in arrival order.
      expect(inputs).toEqual(seqsOf([...newRuns, ...byKind('joined')]).sort((a, b) => a - b));
      expect(steering).toEqual(sortNum(seqsOf(byKind('steered'))));
      expect(pending).toEqual(sortNum(seqsOf(byKind('pending'))));
      expect(acquired?.inputs).toEqual(inputs);

      // Union is exactly the 200 accepted seqs: none twice, none missing.
      const placed = sortNum([...inputs, ...steering, ...pending]);
      expect(new Set(placed).size).toBe(MESSAGES);
      expect(placed).toEqual(sortNum(seqsOf(results)));

      const received = (await fx.record()).filter((e) => e.kind === 'message.received');
      expect(received.map((e) => e.seq)).toEqual(placed);
    });
  });
});
