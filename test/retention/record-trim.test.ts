/** Record trimming behind the compaction checkpoint: what goes, and what a live run, a retry or the next prompt needs stays. */
import { describe, expect, it } from 'vitest';
import { CHECKPOINT_KEY } from '../../runner/compaction/checkpoint.js';
import { compact } from '../../runner/compaction/compactor.js';
import { loadPrompt } from '../../runner/compaction/load.js';
import type { RunRef } from '../../src/protocol/index.js';
import { type RetentionOptions, resolveRetention, retainConversation } from '../../src/protocol/retention.js';
import { readSeqs } from '../../src/record/read.js';
import { memoryLogger, syntheticTurns, writeRecord } from '../compaction/history.js';
import { textModel } from '../compaction/models.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

/** 20 old complete turns (seqs 1-80, `at` in 2023), a running run (81, 82), compacted keeping 4 turns: `covers_until` 64, the compaction entry 83. */
async function compacted(retention: RetentionOptions) {
  await writeRecord(fx.redis, fx.keys(), syntheticTurns(20));
  const { runs, run } = await fx.running({ retention });
  const ref: RunRef = { conversationId: CID, runId: run.runId, token: run.token };
  const { logger } = await memoryLogger();
  const load = () => loadPrompt({ client: fx.redis, prefix: fx.prefix, conversationId: CID, logger });
  const r = await compact({
    run: ref,
    state: fx.state(),
    loaded: await load(),
    trigger: 'manual',
    keepRecentTurns: 4,
    tokensBefore: 5000,
    contextWindow: 100_000,
    model: textModel('summary'),
    logger,
  });
  expect(r.kind).toBe('compacted');
  return { runs, ref, load };
}

const firstSeq = async () => (await fx.record())[0]?.seq;

describe('record trimming', () => {
  it('is off by default: finish trims nothing', async () => {
    const { runs, ref } = await compacted({});
    await runs.finish(ref, 'completed');
    expect(await firstSeq()).toBe(1);
  });

  it('by entries: removes what is before covers_until, keeps covers_until and after; the next prompt is unchanged', async () => {
    const { runs, ref, load } = await compacted({ recordTrimAfterEntries: 10 });
    const before = await load();
    await runs.finish(ref, 'completed');
    // 84 entries, keep the newest 10 (75-84), but never before covers_until (64): 1-63 go.
    expect(await firstSeq()).toBe(64);
    expect(await fx.recordLength()).toBe(84 - 63);
    const after = await load();
    expect(after.rejected).toBeUndefined();
    expect(after.checkpoint?.covers_until).toBe(64);
    expect(after.messages).toEqual(before.messages);
  });

  it('by entries: keeps the newest N even when the checkpoint is further on', async () => {
    const { runs, ref } = await compacted({ recordTrimAfterEntries: 30 });
    await runs.finish(ref, 'completed');
    // Newest 30 of 84: 55-84.
    expect(await firstSeq()).toBe(55);
  });

  it('by age: removes the oldest entries older than the limit, never from covers_until on', async () => {
    const { runs, ref, load } = await compacted({ recordTrimAfterMs: 86_400_000 });
    await runs.finish(ref, 'completed');
    expect(await firstSeq()).toBe(64);
    expect((await load()).rejected).toBeUndefined();
  });

  it('by age: keeps entries younger than the limit', async () => {
    const { runs, ref } = await compacted({ recordTrimAfterMs: 100 * 365 * 86_400_000 });
    await runs.finish(ref, 'completed');
    expect(await firstSeq()).toBe(1);
  });

  it('never removes a live run input, steering or pending message, even behind the checkpoint', async () => {
    await writeRecord(fx.redis, fx.keys(), syntheticTurns(20));
    const { dispatch, run, firstSeq: input } = await fx.running();
    const steered = expectKind(await dispatch.ingest(fx.message('s')), 'steered');
    await dispatch.setPolicy(fx.source(1), 'collect');
    const pending = expectKind(await dispatch.ingest(fx.message('p')), 'pending');
    const last = Number(await fx.redis.hget(fx.keys().meta, 'seq'));
    // A checkpoint claiming to cover all of it (a compaction never selects past a waiting message; trimming must not trust that).
    await fx.state().commitCompaction(run, {
      checkpoint: {
        key: CHECKPOINT_KEY,
        value: {
          schema_version: 1,
          conversation_id: CID,
          summary: 's',
          covers_until: last,
          tokens_before: 2,
          tokens_after: 1,
          created_at: 1,
          summarizer: 'fallback',
        },
        expect: { kind: 'absent' },
      },
      entry: { v: 1, kind: 'compaction', at: Date.now(), run: run.runId, covers_until: last, tokens_before: 2, tokens_after: 1, summarizer: 'fallback' },
      compactRequestedSeq: 0,
    });
    const r = await retainConversation(fx.redis, fx.prefix, CID, resolveRetention({ recordTrimAfterEntries: 1 }));
    expect(r.trimmed).toBe(input - 1);
    expect(await firstSeq()).toBe(input);
    const needed = await readSeqs(fx.redis, fx.keys().log, [input, steered.seq, pending.seq]);
    expect(needed.map((e) => e.kind)).toEqual(['message.received', 'message.received', 'message.received']);
    // A retry of the run (another attempt after a takeover) reads its inputs from the record: they are there.
    expect(needed[0]?.seq).toBe(input);
  });

  it('trims nothing without a checkpoint of this conversation', async () => {
    await writeRecord(fx.redis, fx.keys(), syntheticTurns(5));
    const all = resolveRetention({ recordTrimAfterEntries: 1, recordTrimAfterMs: 1 });
    expect((await retainConversation(fx.redis, fx.prefix, CID, all)).trimmed).toBe(0);
    await fx.redis.hset(fx.keys().state, CHECKPOINT_KEY, JSON.stringify({ schema_version: 1, conversation_id: 'telegram:other', covers_until: 10 }));
    expect((await retainConversation(fx.redis, fx.prefix, CID, all)).trimmed).toBe(0);
    await fx.redis.hset(fx.keys().state, CHECKPOINT_KEY, 'not json');
    expect((await retainConversation(fx.redis, fx.prefix, CID, all)).trimmed).toBe(0);
    expect(await firstSeq()).toBe(1);
  });
});
