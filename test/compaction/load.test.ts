import { describe, expect, it } from 'vitest';
import { CHECKPOINT_KEY, type Checkpoint, SUMMARY_HEADER, summaryMessages, validateCheckpoint } from '../../runner/compaction/checkpoint.js';
import { loadPrompt } from '../../runner/compaction/load.js';
import { projectHistory } from '../../runner/projection.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';
import { ENTRIES_PER_TURN, memoryLogger, syntheticTurns, writeRecord } from './history.js';

const fx = useProtocolFixture();

const TURNS = 1250; // 5000 entries
const TAIL = 300;

function checkpoint(over: Partial<Checkpoint> = {}): Checkpoint {
  return {
    schema_version: 1,
    conversation_id: CID,
    summary: 'Ann asked about the weather in cities 0 to 999; every answer was clear skies.',
    covers_until: 4000,
    tokens_before: 90_000,
    tokens_after: 12_000,
    created_at: 1_700_000_000_000,
    summarizer: 'llm',
    ...over,
  };
}

async function seed(turns = TURNS) {
  const entries = syntheticTurns(turns);
  await writeRecord(fx.redis, fx.keys(), entries);
  return entries;
}

const store = (raw: string) => fx.redis.hset(fx.keys().state, CHECKPOINT_KEY, raw);

async function load(over: { tailEntries?: number; pageSize?: number; resetSeq?: number } = {}) {
  const { logger, lines } = await memoryLogger();
  const loaded = await loadPrompt({ client: fx.redis, prefix: fx.prefix, conversationId: CID, tailEntries: TAIL, logger, ...over });
  return { loaded, lines };
}

describe('validateCheckpoint', () => {
  const ctx = { conversationId: CID, resetSeq: 0, seqExists: async (s: number) => s <= 100 };
  it('accepts a checkpoint of this conversation that covers a seq in the record', async () => {
    expect(await validateCheckpoint(JSON.stringify(checkpoint({ covers_until: 50 })), ctx)).toEqual({ ok: true, checkpoint: checkpoint({ covers_until: 50 }) });
  });
  it.each([
    ['missing', undefined],
    ['unparseable', '{"schema_version":1,'],
    ['newer', JSON.stringify({ ...checkpoint({ covers_until: 50 }), schema_version: 2 })],
    ['schema', JSON.stringify({ ...checkpoint({ covers_until: 50 }), summary: 42 })],
    ['conversation', JSON.stringify(checkpoint({ covers_until: 50, conversation_id: 'telegram:43' }))],
    ['not-in-record', JSON.stringify(checkpoint({ covers_until: 101 }))],
  ])('rejects it as %s', async (reason, raw) => {
    expect(await validateCheckpoint(raw, ctx)).toEqual({ ok: false, reason });
  });
  it('rejects a checkpoint older than the last reset', async () => {
    expect(await validateCheckpoint(JSON.stringify(checkpoint({ covers_until: 50 })), { ...ctx, resetSeq: 60 })).toEqual({ ok: false, reason: 'before-reset' });
  });
});

describe('loadPrompt', () => {
  describe('with a valid checkpoint', () => {
    it('reads only the entries after covers_until, in pages, behind the summary', async () => {
      const entries = await seed();
      await store(JSON.stringify(checkpoint()));
      const { loaded } = await load({ pageSize: 128 });
      expect(loaded.rejected).toBeUndefined();
      expect(loaded.checkpoint).toEqual(checkpoint());
      expect(loaded.entriesRead).toBe(5000 - 4000);
      expect(loaded.entries[0]!.seq).toBe(4001);
      expect(loaded.lastSeq).toBe(5000);
      const after = projectHistory(entries.slice(4000), { unclaimed: 'exclude' }).messages;
      expect(loaded.messages).toEqual([...summaryMessages(checkpoint()), ...after]);
    });

    it('reads nothing more when the checkpoint covers the whole record', async () => {
      await seed(10);
      await store(JSON.stringify(checkpoint({ covers_until: 40 })));
      const { loaded } = await load();
      expect(loaded.entriesRead).toBe(0);
      expect(loaded.lastSeq).toBe(40);
      expect(loaded.messages).toHaveLength(1);
    });

    it('keeps the prompt prefix byte-identical across loads while no compaction happens', async () => {
      await seed();
      await store(JSON.stringify(checkpoint()));
      const first = (await load()).loaded;
      // A new turn arrives between the two runs; the checkpoint stands.
      await writeRecord(fx.redis, fx.keys(), syntheticTurns(1, 5001, TURNS));
      const second = (await load()).loaded;
      expect(second.entriesRead).toBe(first.entriesRead + ENTRIES_PER_TURN);
      const bytes = (m: unknown[]) => Buffer.from(JSON.stringify(m));
      expect(bytes(second.messages.slice(0, first.messages.length)).equals(bytes(first.messages))).toBe(true);
      expect(JSON.stringify(second.messages[0])).toBe(JSON.stringify(first.messages[0]));
    });
  });

  describe('without a usable checkpoint', () => {
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['missing', async () => undefined],
      ['unparseable', () => store('{"schema_version":1,"summary":')],
      ['newer', () => store(JSON.stringify({ ...checkpoint(), schema_version: 2 }))],
      ['conversation', () => store(JSON.stringify(checkpoint({ conversation_id: 'telegram:43' })))],
      ['not-in-record', () => store(JSON.stringify(checkpoint({ covers_until: 9999 })))],
      [
        'before-reset',
        async () => {
          await writeRecord(fx.redis, fx.keys(), [{ v: 1, at: 1, kind: 'conversation.reset', seq: 5001 }, ...syntheticTurns(2, 5002, 5000)]);
          await fx.redis.hset(fx.keys().meta, 'reset_seq', 5001);
          await store(JSON.stringify(checkpoint()));
        },
      ],
    ];

    it.each(cases)('falls back to the bounded tail when the checkpoint is %s, and says why', async (reason, arrange) => {
      await seed();
      await arrange();
      const { loaded, lines } = await load();
      expect(loaded.rejected).toBe(reason);
      expect(loaded.checkpoint).toBeUndefined();
      expect(loaded.entriesRead).toBeLessThanOrEqual(TAIL);
      expect(loaded.entriesRead).toBe(TAIL);
      expect(loaded.messages[0]?.content).not.toContain(SUMMARY_HEADER);
      const said = lines.find((l) => String(l.msg).includes('checkpoint'));
      expect(said).toBeDefined();
      if (reason !== 'missing') expect(said).toMatchObject({ level: 40, reason });
      if (reason === 'before-reset') {
        // Nothing from before the reset reaches the prompt.
        expect(loaded.messages.map((m) => JSON.stringify(m.content)).join()).not.toContain('question 1249');
        expect(loaded.messages[0]).toEqual({ role: 'user', content: expect.stringContaining('question 5000') });
      }
    });

    it('reads the reset seq from the meta hash unless given', async () => {
      await seed(10);
      await store(JSON.stringify(checkpoint({ covers_until: 20 })));
      await fx.redis.hset(fx.keys().meta, 'reset_seq', 30);
      expect((await load()).loaded.rejected).toBe('before-reset');
      expect((await load({ resetSeq: 0 })).loaded.checkpoint?.covers_until).toBe(20);
    });
  });
});
