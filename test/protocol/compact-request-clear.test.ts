/** compact-request-clear: a /compact that found nothing to compact is cleared, fenced, and only up to the request the run read. */
import { describe, expect, it } from 'vitest';
import { StaleRunError } from '../../src/errors.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('clearing a /compact request', () => {
  const fx = useProtocolFixture();

  /** A running run of CID and a /compact requested during it. */
  async function runningWithRequest() {
    const r = await fx.dispatch().ingest(fx.message(1));
    const runs = fx.runs();
    const acquired = await runs.acquire(CID, (r as { runId: string }).runId, 'w1');
    const ref = { conversationId: CID, runId: acquired.runId, token: acquired.token };
    const req = await fx.dispatch().requestCompaction(fx.source(2));
    expect(req.kind).toBe('requested');
    return { ref, seq: req.seq };
  }

  it('clears the request the run read', async () => {
    const { ref, seq } = await runningWithRequest();
    expect(await fx.state().clearCompactRequest(ref, seq)).toBe(true);
    expect((await fx.dispatch().status(CID)).compactionRequestedSeq).toBe(0);
  });

  it('leaves a request newer than the one the run read', async () => {
    const { ref, seq } = await runningWithRequest();
    const newer = await fx.dispatch().requestCompaction(fx.source(3));
    expect(await fx.state().clearCompactRequest(ref, seq)).toBe(false);
    expect((await fx.dispatch().status(CID)).compactionRequestedSeq).toBe(newer.seq);
  });

  it('refuses a stale token and writes nothing', async () => {
    const { ref, seq } = await runningWithRequest();
    await expect(fx.state().clearCompactRequest({ ...ref, token: ref.token + 1 }, seq)).rejects.toBeInstanceOf(StaleRunError);
    expect((await fx.dispatch().status(CID)).compactionRequestedSeq).toBe(seq);
  });
});
