/** Conversation state: namespaced keys, a size cap, fenced writes and compare-and-set. */
import { describe, expect, it } from 'vitest';
import { CasConflictError, InvalidInputError, RunEndedError, StaleRunError } from '../../src/errors.js';
import { assertStateKey } from '../../src/protocol/index.js';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const KEY = 'runner.compaction.checkpoint';

describe('conversation state', () => {
  const fx = useProtocolFixture();

  describe('set and get', () => {
    it('stores JSON and reads it back', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      expect(await state.get(CID, KEY)).toBeUndefined();
      await state.set(run, KEY, { covers_until: 7, summary: 'héllo' });
      expect(await state.get(CID, KEY)).toEqual({ covers_until: 7, summary: 'héllo' });
      expect(await state.getRaw(CID, KEY)).toBe('{"covers_until":7,"summary":"héllo"}');
      expect(await fx.redis.hgetall(fx.keys().state)).toEqual({ [KEY]: '{"covers_until":7,"summary":"héllo"}' });
    });

    it('deletes a value', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      await state.set(run, KEY, 1);
      await state.delete(run, KEY);
      expect(await state.get(CID, KEY)).toBeUndefined();
    });
  });

  describe('key validation', () => {
    const badKeys: Array<[string, string]> = [
      ['an unnamespaced key', 'foo'],
      ['an uppercase namespace', 'Foo.bar'],
      ['an uppercase segment', 'runner.Compaction'],
      ['a 200-character key', `runner.${'a'.repeat(193)}`],
      ['a 129-character key', `runner.${'a'.repeat(122)}`],
      ['an empty key', ''],
      ['an empty segment', 'runner..checkpoint'],
      ['a leading dot', '.runner.checkpoint'],
      ['a trailing dot', 'runner.'],
      ['whitespace', 'runner. checkpoint'],
      ['a leading digit', '1runner.x'],
    ];

    it.each(badKeys)('refuses %s on set, delete and get, writing nothing', async (_name, key) => {
      const { run } = await fx.running();
      const state = fx.state();
      const before = await fx.snapshot();
      await expect(state.set(run, key, 1)).rejects.toBeInstanceOf(InvalidInputError);
      await expect(state.delete(run, key)).rejects.toBeInstanceOf(InvalidInputError);
      await expect(state.get(CID, key)).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.snapshot()).toEqual(before);
    });

    it.each(['runner.compaction.checkpoint', 'a.b', 'my-plugin.some_key.v2', `runner.${'a'.repeat(121)}`])('accepts %s', (key) => {
      expect(key.length).toBeLessThanOrEqual(128);
      expect(() => assertStateKey(key)).not.toThrow();
    });
  });

  describe('size cap', () => {
    it('refuses a value over maxStateBytes with InvalidInputError and writes nothing', async () => {
      const { run } = await fx.running();
      const state = fx.state({ maxStateBytes: 64 });
      const before = await fx.snapshot();
      // JSON of a 63-character string is 65 bytes.
      await expect(state.set(run, KEY, 'x'.repeat(63))).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.snapshot()).toEqual(before);
      await state.set(run, KEY, 'x'.repeat(62)); // exactly 64 bytes
      expect(await state.get(CID, KEY)).toBe('x'.repeat(62));
    });

    it('counts bytes, not characters', async () => {
      const { run } = await fx.running();
      const state = fx.state({ maxStateBytes: 64 });
      await state.set(run, KEY, 'é'.repeat(31)); // 2 + 62 bytes
      await expect(state.set(run, KEY, 'é'.repeat(32))).rejects.toBeInstanceOf(InvalidInputError); // 2 + 64 bytes
      expect(await state.get(CID, KEY)).toBe('é'.repeat(31));
    });

    it('is enforced by the script too', async () => {
      const { run, runId } = await fx.running();
      const k = fx.keys();
      const reply = await runScript(fx.redis, 'state-set', [k.run(runId), k.state], [run.token, KEY, 'set', '"xxxxxxxxxx"', 'any', '', 8]);
      expect(() => checkReply('state-set', reply, runId)).toThrow(InvalidInputError);
      expect(await fx.redis.exists(k.state)).toBe(0);
    });

    it.each([
      ['undefined', undefined],
      ['a function', () => 1],
      ['a BigInt', 10n],
    ])('refuses %s as not JSON-serializable', async (_name, value) => {
      const { run } = await fx.running();
      await expect(fx.state().set(run, KEY, value)).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.redis.exists(fx.keys().state)).toBe(0);
    });
  });

  describe('compare-and-set', () => {
    it('sets with expect absent when the key is absent', async () => {
      const { run } = await fx.running();
      await fx.state().set(run, KEY, 1, { kind: 'absent' });
      expect(await fx.state().get(CID, KEY)).toBe(1);
    });

    it('conflicts with expect absent when the key is present, returning the current value', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      await state.set(run, KEY, { covers_until: 1 });
      const err = await state.set(run, KEY, { covers_until: 2 }, { kind: 'absent' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CasConflictError);
      expect((err as CasConflictError).current).toBe('{"covers_until":1}');
      expect(await state.getRaw(CID, KEY)).toBe('{"covers_until":1}');
    });

    it('sets with expect equals when the raw value matches', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      await state.set(run, KEY, { covers_until: 1 });
      await state.set(run, KEY, { covers_until: 2 }, { kind: 'equals', raw: '{"covers_until":1}' });
      expect(await state.get(CID, KEY)).toEqual({ covers_until: 2 });
    });

    it('conflicts with expect equals after a concurrent writer won, returning the winning value', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      await state.set(run, KEY, { covers_until: 1 });
      const read = (await state.getRaw(CID, KEY))!;
      await state.set(run, KEY, { covers_until: 5 }); // the winner
      const err = await state.set(run, KEY, { covers_until: 2 }, { kind: 'equals', raw: read }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CasConflictError);
      expect((err as CasConflictError).current).toBe('{"covers_until":5}');
      expect(await state.get(CID, KEY)).toEqual({ covers_until: 5 });
    });

    it('conflicts with expect equals when the key is absent, with current undefined', async () => {
      const { run } = await fx.running();
      const err = await fx
        .state()
        .set(run, KEY, 1, { kind: 'equals', raw: '0' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CasConflictError);
      expect((err as CasConflictError).current).toBeUndefined();
      expect(await fx.redis.exists(fx.keys().state)).toBe(0);
    });

    it('guards delete too', async () => {
      const { run } = await fx.running();
      const state = fx.state();
      await state.set(run, KEY, 1);
      await expect(state.delete(run, KEY, { kind: 'equals', raw: '2' })).rejects.toBeInstanceOf(CasConflictError);
      expect(await state.get(CID, KEY)).toBe(1);
      await state.delete(run, KEY, { kind: 'equals', raw: '1' });
      expect(await state.get(CID, KEY)).toBeUndefined();
    });
  });

  describe('when the run has ended', () => {
    it('refuses writes with RunEndedError', async () => {
      const { runs, run } = await fx.running();
      await runs.finish(run, 'completed');
      await expect(fx.state().set(run, KEY, 1)).rejects.toBeInstanceOf(RunEndedError);
      expect(await fx.redis.exists(fx.keys().state)).toBe(0);
    });
  });

  describe('commitCompaction', () => {
    const BREAKER = 'runner.compaction.breaker';
    const entry = (run: { runId: string }) => ({
      v: 1 as const,
      kind: 'compaction' as const,
      at: 1,
      run: run.runId,
      covers_until: 1,
      tokens_before: 100,
      tokens_after: 10,
      summarizer: 'llm' as const,
    });

    it('writes the checkpoint, the compaction entry and the breaker together, and satisfies an earlier /compact', async () => {
      const { dispatch, run, runId } = await fx.running();
      const req = await dispatch.requestCompaction(fx.source(9));
      const seq = await fx.state().commitCompaction(run, {
        checkpoint: { key: KEY, value: { summary: 's' }, expect: { kind: 'absent' } },
        entry: entry({ runId }),
        breaker: { key: BREAKER, value: { open: false } },
        compactRequestedSeq: req.seq,
      });
      expect(await fx.state().get(CID, KEY)).toEqual({ summary: 's' });
      expect(await fx.state().get(CID, BREAKER)).toEqual({ open: false });
      expect((await fx.record()).at(-1)).toMatchObject({ seq, kind: 'compaction' });
      expect((await dispatch.status(CID)).compactionRequestedSeq).toBe(0);
    });

    it('leaves a /compact that arrived after the one the compaction read', async () => {
      const { dispatch, run, runId } = await fx.running();
      const read = await dispatch.requestCompaction(fx.source(9));
      // Sent while the summarizer was working: this compaction never saw it.
      const later = await dispatch.requestCompaction(fx.source(10));
      await fx.state().commitCompaction(run, {
        checkpoint: { key: KEY, value: { summary: 's' }, expect: { kind: 'absent' } },
        entry: entry({ runId }),
        compactRequestedSeq: read.seq,
      });
      expect((await dispatch.status(CID)).compactionRequestedSeq).toBe(later.seq);
    });

    it('writes nothing when another compaction won (CAS) or the token is stale', async () => {
      const { run, runId } = await fx.running();
      await fx.state().set(run, KEY, { summary: 'theirs' });
      const before = await fx.snapshot();
      const commit = (r: typeof run) =>
        fx.state().commitCompaction(r, {
          checkpoint: { key: KEY, value: { summary: 'mine' }, expect: { kind: 'absent' } },
          entry: entry({ runId }),
          breaker: { key: BREAKER, value: { open: true } },
          compactRequestedSeq: 0,
        });
      await expect(commit(run)).rejects.toBeInstanceOf(CasConflictError);
      await expect(commit({ ...run, token: run.token + 1 })).rejects.toBeInstanceOf(StaleRunError);
      expect(await fx.snapshot()).toEqual(before);
    });
  });
});
