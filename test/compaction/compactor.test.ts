import { APICallError, RetryError } from 'ai';
import { describe, expect, it } from 'vitest';
import { CHECKPOINT_KEY, type Checkpoint, summaryMessages } from '../../runner/compaction/checkpoint.js';
import { BREAKER_KEY, type CompactOptions, compact, type LoadedBase, readBreaker, shouldCompact } from '../../runner/compaction/compactor.js';
import { loadPrompt } from '../../runner/compaction/load.js';
import { isContextOverflowError } from '../../runner/compaction/overflow.js';
import { compactIfNeeded } from '../../runner/compaction/pressure.js';
import { StaleRunError } from '../../src/errors.js';
import type { RunRef } from '../../src/protocol/runs.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';
import { memoryLogger, syntheticTurns, writeRecord } from './history.js';
import { failingModel, textModel } from './models.js';

const fx = useProtocolFixture();

/** 20 complete turns (seqs 1-80), then a running run: its message at 81, run.started at 82. */
async function conversation(turns = 20) {
  await writeRecord(fx.redis, fx.keys(), syntheticTurns(turns));
  const { runs, run } = await fx.running();
  const ref: RunRef = { conversationId: CID, runId: run.runId, token: run.token };
  const { logger } = await memoryLogger();
  const state = fx.state();
  const load = () => loadPrompt({ client: fx.redis, prefix: fx.prefix, conversationId: CID, logger });
  const base = (loaded: LoadedBase, over: Partial<CompactOptions> = {}): CompactOptions => ({
    run: ref,
    state,
    loaded,
    trigger: 'pressure',
    tokensBefore: 5000,
    contextWindow: 100_000,
    model: textModel('Ann asked about the weather in many cities.'),
    logger,
    ...over,
  });
  return { ref, runs, state, logger, load, base };
}

const storedCheckpoint = async (): Promise<Checkpoint | undefined> => {
  const raw = await fx.redis.hget(fx.keys().state, CHECKPOINT_KEY);
  return raw ? (JSON.parse(raw) as Checkpoint) : undefined;
};

describe('compact', () => {
  it('writes the checkpoint and a compaction entry; the next load reads only what follows', async () => {
    const c = await conversation();
    const r = await compact(c.base(await c.load(), { trigger: 'manual', keepRecentTurns: 4 }));
    expect(r.kind).toBe('compacted');
    if (r.kind !== 'compacted') return;
    expect(r.checkpoint).toMatchObject({
      schema_version: 1,
      conversation_id: CID,
      covers_until: 64,
      summarizer: 'llm',
      tokens_before: 5000,
      summary: 'Ann asked about the weather in many cities.',
    });
    expect(r.checkpoint.tokens_after).toBeGreaterThan(0);
    expect(await storedCheckpoint()).toEqual(r.checkpoint);
    const record = await fx.record();
    expect(record.at(-1)).toMatchObject({
      kind: 'compaction',
      seq: r.seq,
      run: c.ref.runId,
      covers_until: 64,
      tokens_before: 5000,
      tokens_after: r.checkpoint.tokens_after,
      summarizer: 'llm',
    });

    const next = await c.load();
    expect(next.checkpoint).toEqual(r.checkpoint);
    expect(next.entriesRead).toBe(r.seq - 64);
    expect(next.messages).toEqual(r.messages);
    expect(next.messages[0]).toEqual(summaryMessages({ summary: 'Ann asked about the weather in many cities.' })[0]);
  });

  it('merges the previous summary into the next one', async () => {
    const c = await conversation();
    const first = await compact(c.base(await c.load(), { trigger: 'manual', keepRecentTurns: 10 }));
    expect(first.kind).toBe('compacted');
    const model = textModel('merged');
    const second = await compact(c.base(await c.load(), { trigger: 'manual', keepRecentTurns: 2, model }));
    expect(second).toMatchObject({ kind: 'compacted', checkpoint: { covers_until: 72, summary: 'merged' } });
    expect(JSON.stringify(model.doGenerateCalls[0]!.prompt)).toContain('Previous summary:\\nAnn asked about the weather in many cities.');
  });

  it('writes the deterministic summary when the summarizer fails, so the conversation still shrinks', async () => {
    const c = await conversation();
    const r = await compact(c.base(await c.load(), { trigger: 'manual', model: failingModel() }));
    expect(r).toMatchObject({ kind: 'compacted', checkpoint: { summarizer: 'fallback', covers_until: 64 } });
    const cp = (await storedCheckpoint())!;
    expect(cp.summarizer).toBe('fallback');
    expect(cp.summary).toContain('User: question 0: what is the weather like in city number 0?');
    expect(cp.summary).toContain('Assistant: answer 15');
    expect((await fx.record()).at(-1)).toMatchObject({ kind: 'compaction', summarizer: 'fallback' });
    expect(cp.tokens_after).toBeLessThan(cp.tokens_before);
  });

  describe('when another writer compacts concurrently', () => {
    it('keeps the checkpoint that landed first and discards its own', async () => {
      const c = await conversation();
      const loaded = await c.load();
      const newer = {
        schema_version: 1,
        conversation_id: CID,
        summary: 'newer',
        covers_until: 72,
        tokens_before: 1,
        tokens_after: 1,
        created_at: 1,
        summarizer: 'llm',
      };
      await c.state.set(c.ref, CHECKPOINT_KEY, newer);
      const before = await fx.recordLength();
      const r = await compact(c.base(loaded, { trigger: 'manual' }));
      expect(r).toEqual({ kind: 'conflict', current: JSON.stringify(newer) });
      expect(await storedCheckpoint()).toEqual(newer);
      expect(await fx.recordLength()).toBe(before);
    });

    it('lets exactly one of two racing compactions from the same base win', async () => {
      const c = await conversation();
      const first = await compact(c.base(await c.load(), { trigger: 'manual', keepRecentTurns: 12 }));
      expect(first.kind).toBe('compacted');
      const loaded = await c.load();
      const clients = fx.connections(2);
      const results = await Promise.all(
        clients.map((client, i) =>
          compact(c.base(loaded, { trigger: 'manual', keepRecentTurns: 2 + i, state: fx.state({}, client), model: textModel(`writer ${i}`) })),
        ),
      );
      const won = results.filter((r) => r.kind === 'compacted');
      expect(won).toHaveLength(1);
      expect(results.filter((r) => r.kind === 'conflict')).toHaveLength(1);
      expect(await storedCheckpoint()).toEqual(won[0]!.kind === 'compacted' && won[0]!.checkpoint);
      expect((await fx.record()).filter((e) => e.kind === 'compaction')).toHaveLength(2);
    });
  });

  it('applies a /compact request once: the load reports it until a compaction entry follows it', async () => {
    const c = await conversation();
    expect((await c.load()).manualRequested).toBe(false);
    const req = await fx.dispatch().requestCompaction(fx.source(1));
    expect(req.kind).toBe('requested');
    const loaded = await c.load();
    expect(loaded.manualRequested).toBe(true);
    expect(await compact(c.base(loaded, { trigger: 'manual' }))).toMatchObject({ kind: 'compacted' });
    expect((await c.load()).manualRequested).toBe(false);
  });

  it('writes nothing for a run that lost its fence', async () => {
    const c = await conversation();
    const before = await fx.snapshot();
    await expect(compact(c.base(await c.load(), { trigger: 'manual', run: { ...c.ref, token: c.ref.token + 1 } }))).rejects.toBeInstanceOf(StaleRunError);
    expect(await fx.snapshot()).toEqual(before);
  });

  it('skips when nothing but the recent turns and the run in progress remain', async () => {
    const c = await conversation(3);
    expect(await compact(c.base(await c.load(), { trigger: 'manual', keepRecentTurns: 4 }))).toEqual({ kind: 'skipped', reason: 'nothing-to-compact' });
  });

  describe('circuit breaker', () => {
    /** Three pressure compactions that each leave the estimate over a tiny window. */
    async function threeIneffective(c: Awaited<ReturnType<typeof conversation>>) {
      let loaded: LoadedBase = await c.load();
      for (const keep of [12, 8, 4]) {
        const r = await compact(c.base(loaded, { contextWindow: 50, keepRecentTurns: keep }));
        expect(r).toMatchObject({ kind: 'compacted', effective: false });
        if (r.kind === 'compacted') loaded = r;
      }
      return loaded;
    }

    it('opens after three consecutive ineffective compactions and stops pressure compaction', async () => {
      const c = await conversation();
      expect(await readBreaker(c.state, CID)).toEqual({ open: false, ineffective: 0 });
      const loaded = await threeIneffective(c);
      expect(await readBreaker(c.state, CID)).toEqual({ open: true, ineffective: 3 });
      const model = textModel('never');
      expect(await compact(c.base(loaded, { contextWindow: 50, keepRecentTurns: 0, model }))).toEqual({ kind: 'skipped', reason: 'breaker-open' });
      const check = await compactIfNeeded({ ...c.base(await c.load(), { contextWindow: 50, keepRecentTurns: 0, model }), loaded: await c.load() });
      expect(check.result).toBeUndefined();
      expect(model.doGenerateCalls).toHaveLength(0);
    });

    it('closes after a compaction that brings the estimate under the threshold', async () => {
      const c = await conversation();
      await threeIneffective(c);
      const r = await compact(c.base(await c.load(), { trigger: 'overflow', contextWindow: 1_000_000 }));
      expect(r).toMatchObject({ kind: 'compacted', effective: true, breaker: { open: false, ineffective: 0 } });
      expect(await readBreaker(c.state, CID)).toEqual({ open: false, ineffective: 0 });
    });

    it('is reset by a manual compaction', async () => {
      const c = await conversation();
      await threeIneffective(c);
      const r = await compact(c.base(await c.load(), { trigger: 'manual', contextWindow: 10, keepRecentTurns: 0 }));
      expect(r).toMatchObject({ kind: 'compacted', effective: false, breaker: { open: false, ineffective: 1 } });
      expect(JSON.parse((await fx.redis.hget(fx.keys().state, BREAKER_KEY))!)).toMatchObject({ schema_version: 1, open: false, ineffective: 1 });
    });
  });
});

describe('compactIfNeeded', () => {
  it('does nothing below the threshold: no summarizer call, the prompt unchanged', async () => {
    const c = await conversation();
    const loaded = await c.load();
    const model = textModel('unused');
    const check = await compactIfNeeded({ ...c.base(loaded, { model, contextWindow: 1_000_000 }), loaded });
    expect(check.result).toBeUndefined();
    expect(check.messages).toBe(loaded.messages);
    expect(check.estimate.basis).toBe('usage');
    expect(model.doGenerateCalls).toHaveLength(0);
    expect(await storedCheckpoint()).toBeUndefined();
  });

  it('compacts once the estimate crosses threshold × window, and returns the new prompt', async () => {
    const c = await conversation();
    const loaded = await c.load();
    const model = textModel('short summary');
    const check = await compactIfNeeded({ ...c.base(loaded, { model, contextWindow: 1000, threshold: 0.8 }), loaded });
    expect(check.estimate.tokens).toBeGreaterThan(800);
    expect(check.result).toMatchObject({ kind: 'compacted', effective: true });
    expect(model.doGenerateCalls).toHaveLength(1);
    expect(check.messages).toEqual((await c.load()).messages);
    // The compaction entry makes the old usage count stale: the next check estimates the new prompt and stays quiet.
    const again = await compactIfNeeded({ ...c.base(check.loaded, { model, contextWindow: 1000, threshold: 0.8 }), loaded: check.loaded });
    expect(again.result).toBeUndefined();
    expect(again.estimate.basis).toBe('estimate');
    expect(model.doGenerateCalls).toHaveLength(1);
  });
});

describe('shouldCompact', () => {
  it.each([
    [{ estimate: 801, contextWindow: 1000, breakerOpen: false, trigger: 'pressure' }, true],
    [{ estimate: 800, contextWindow: 1000, breakerOpen: false, trigger: 'pressure' }, false],
    [{ estimate: 600, contextWindow: 1000, threshold: 0.5, breakerOpen: false, trigger: 'pressure' }, true],
    [{ estimate: 5000, contextWindow: 1000, breakerOpen: true, trigger: 'pressure' }, false],
    [{ estimate: 10, contextWindow: 1000, breakerOpen: true, trigger: 'overflow' }, true],
    [{ estimate: 10, contextWindow: 1000, breakerOpen: true, trigger: 'manual' }, true],
  ] as const)('%o → %s', (input, expected) => {
    expect(shouldCompact(input)).toBe(expected);
  });
});

describe('isContextOverflowError', () => {
  const apiError = (statusCode: number, responseBody: string) =>
    new APICallError({ message: 'Bad Request', url: 'http://x', requestBodyValues: {}, statusCode, responseBody });
  it.each([
    ['OpenAI', apiError(400, '{"error":{"code":"context_length_exceeded","message":"This model\'s maximum context length is 128000 tokens."}}'), true],
    [
      'Anthropic',
      apiError(400, '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}'),
      true,
    ],
    ['a 413', apiError(413, 'Request Entity Too Large'), true],
    [
      'wrapped in a RetryError',
      new RetryError({ message: 'failed', reason: 'maxRetriesExceeded', errors: [apiError(400, 'maximum context length exceeded')] }),
      true,
    ],
    ['a rate limit', apiError(429, 'too many tokens per minute'), false],
    ['a bad key', apiError(401, 'invalid api key'), false],
    ['a plain error', new Error('prompt is too long'), false],
  ])('%s → %s', (_, err, expected) => {
    expect(isContextOverflowError(err)).toBe(expected);
  });
});
