/** Many hosts ingesting into one idle conversation at once: one run, every message exactly once. */
import { describe, expect, it } from 'vitest';
import type { AcquiredRun, Dispatch, IngestResult } from '../../src/protocol/index.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const MESSAGES = 200;
const CONNECTIONS = 4;
const STEERING_CAP = 50;

const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);

describe('ingest under concurrency', () => {
  const fx = useProtocolFixture();

  function hosts(): Dispatch[] {
    return fx.connections(CONNECTIONS).map((c) => fx.dispatch({ steeringCap: STEERING_CAP }, c));
  }

  /** Checks one run, one active pointer, and each accepted seq in exactly the place its result named. */
  async function expectEveryMessageOnce(results: IngestResult[]): Promise<{ runId: string; inputs: number[] }> {
    const byKind = (k: IngestResult['kind']) => results.filter((r) => r.kind === k);
    const seqsOf = (rs: IngestResult[]) => rs.map((r) => r.seq);
    const newRuns = byKind('new-run');
    expect(newRuns).toHaveLength(1);
    expect(byKind('duplicate')).toHaveLength(0);
    expect(byKind('interrupting')).toHaveLength(0);
    expect(newRuns.length + byKind('joined').length + byKind('steered').length + byKind('pending').length).toBe(MESSAGES);
    for (const r of byKind('pending')) expect(r).toMatchObject({ reason: 'overflow' });

    const runId = (newRuns[0] as { runId: string }).runId;
    for (const r of results) if ('runId' in r) expect(r.runId).toBe(runId);

    // Exactly one run exists and it is the active one.
    expect((await fx.allKeys()).filter((k) => k.includes(':run:'))).toEqual([fx.keys().run(runId)]);
    expect(await fx.redis.get(fx.keys().active)).toBe(runId);

    const inputs = await fx.inputs(runId);
    const steering = await fx.steering(runId);
    const pending = await fx.pending();
    // Each place holds exactly the messages whose result said so, in arrival (seq) order.
    expect(inputs).toEqual(sortNum(seqsOf([...newRuns, ...byKind('joined')])));
    expect(steering).toEqual(sortNum(seqsOf(byKind('steered'))));
    expect(pending).toEqual(sortNum(seqsOf(byKind('pending'))));

    // The union is exactly the 200 accepted seqs: none twice, none missing.
    const placed = sortNum([...inputs, ...steering, ...pending]);
    expect(new Set(placed).size).toBe(MESSAGES);
    expect(placed).toEqual(sortNum(seqsOf(results)));
    const received = (await fx.record()).filter((e) => e.kind === 'message.received');
    expect(received.map((e) => e.seq)).toEqual(placed);
    return { runId, inputs };
  }

  describe(`when ${MESSAGES} distinct messages race into an idle conversation over ${CONNECTIONS} connections`, () => {
    it('creates exactly one run and joins every other message to it', async () => {
      const dispatches = hosts();
      const results = await Promise.all(Array.from({ length: MESSAGES }, (_, i) => dispatches[i % CONNECTIONS]!.ingest(fx.message(i))));
      await expectEveryMessageOnce(results);
      expect(results.filter((r) => r.kind === 'joined')).toHaveLength(MESSAGES - 1);
    });
  });

  describe('when a worker acquires the run while the messages are still arriving', () => {
    it('places every message exactly once across inputs, steering and overflow pending', async () => {
      const dispatches = hosts();
      const worker = fx.runs({}, fx.connection());
      const WAVE = 20;
      const wave = (w: number) => Promise.all(Array.from({ length: WAVE }, (_, j) => dispatches[j % CONNECTIONS]!.ingest(fx.message(w * WAVE + j))));

      const results: IngestResult[] = [...(await wave(0))];
      const created = results.find((r) => r.kind === 'new-run') as { runId: string } | undefined;
      expect(created).toBeDefined();
      // The acquire races waves 1 and 2; everything after it arrives at a running run.
      const acquiring: Promise<AcquiredRun> = worker.acquire(CID, created!.runId, 'worker-1');
      const [w1, w2] = await Promise.all([wave(1), wave(2)]);
      const acquired = await acquiring;
      results.push(...w1, ...w2);
      for (let w = 3; w < MESSAGES / WAVE; w++) results.push(...(await wave(w)));

      const { inputs } = await expectEveryMessageOnce(results);
      expect(acquired.inputs).toEqual(inputs);
      expect(results.filter((r) => r.kind === 'steered')).toHaveLength(STEERING_CAP);
      expect(results.filter((r) => r.kind === 'pending').length).toBeGreaterThan(0);
    });
  });
});
