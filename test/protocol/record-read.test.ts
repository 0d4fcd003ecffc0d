/**
 * Record reads fail closed: an entry that is not what it claims to be is a
 * RecordError naming its seq. A kind or version of a newer release is
 * neither: it is skipped and stays in the record (docs/operations.md#upgrades).
 */
import { describe, expect, it } from 'vitest';
import { RecordError } from '../../src/errors.js';
import { readAfter, readRange, readSeqs, readTail } from '../../src/record/read.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('record reads', () => {
  const fx = useProtocolFixture();

  /** Two good entries (seq 1 message, seq 2 run.started), then `fields` written raw at seq 3. */
  async function withGarbageAt3(...fields: string[]): Promise<string> {
    await fx.running();
    const log = fx.keys().log;
    await fx.redis.xadd(log, '3-0', ...fields);
    return log;
  }

  const garbage: Array<[string, string[], RegExp]> = [
    ['invalid JSON', ['e', '{"v":1,"kind":'], /record entry 3 is not JSON/],
    ['no kind', ['e', JSON.stringify({ v: 1, at: 1 })], /record entry 3 has no kind/],
    ['a bad version', ['e', JSON.stringify({ v: 'two', kind: 'run.control', at: 1, run: 'r1', seqs: [1], control: 'stop' })], /record entry 3: .*bad v/],
    [
      'a known kind missing a field',
      ['e', JSON.stringify({ v: 1, kind: 'message.received', at: 1, updateKey: 'x', text: 'hi' })],
      /record entry 3: kind message\.received \(version 1\) cannot be read/,
    ],
    ['a JSON array', ['e', '[1,2]'], /record entry 3/],
    ['no body field', ['x', '{}'], /record entry 3 has no body/],
  ];

  describe.each(garbage)('when an entry has %s', (_name, fields, message) => {
    it('readRange throws RecordError naming the seq', async () => {
      const log = await withGarbageAt3(...fields);
      const err = await readRange(fx.redis, log).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RecordError);
      expect((err as RecordError).code).toBe('RECORD');
      expect((err as RecordError).message).toMatch(message);
    });

    it('readTail, readAfter and readSeqs throw too', async () => {
      const log = await withGarbageAt3(...fields);
      await expect(readTail(fx.redis, log, 1)).rejects.toBeInstanceOf(RecordError);
      await expect(readSeqs(fx.redis, log, [3])).rejects.toBeInstanceOf(RecordError);
      const pages = async () => {
        for await (const _page of readAfter(fx.redis, log, 0)) void _page;
      };
      await expect(pages()).rejects.toBeInstanceOf(RecordError);
    });

    it('still reads the good entries before it', async () => {
      const log = await withGarbageAt3(...fields);
      expect((await readRange(fx.redis, log, { toSeq: 2 })).map((e) => e.kind)).toEqual(['message.received', 'run.started']);
    });
  });

  const newer: Array<[string, string[]]> = [
    ['an unknown kind', ['e', JSON.stringify({ v: 1, kind: 'unknown.kind', at: 1 })]],
    ['a newer version', ['e', JSON.stringify({ v: 2, kind: 'run.control', at: 1, run: 'r1', seqs: [1], control: 'stop' })]],
  ];

  describe.each(newer)('when an entry has %s (a newer release wrote it)', (_name, fields) => {
    it('every read skips it, and it stays in the record', async () => {
      const log = await withGarbageAt3(...fields);
      await fx.redis.xadd(log, '4-0', 'e', JSON.stringify({ v: 1, kind: 'run.control', at: 2, run: 'r1', seqs: [1], control: 'stop' }));
      expect((await readRange(fx.redis, log)).map((e) => e.seq)).toEqual([1, 2, 4]);
      expect((await readTail(fx.redis, log, 2)).map((e) => e.seq)).toEqual([4]);
      expect((await readSeqs(fx.redis, log, [1, 3, 4])).map((e) => e.seq)).toEqual([1, 4]);
      const paged: number[] = [];
      for await (const page of readAfter(fx.redis, log, 0, 2)) paged.push(...page.map((e) => e.seq));
      expect(paged).toEqual([1, 2, 4]);
      expect(await fx.redis.xlen(log)).toBe(4);
    });
  });

  describe('readSeqs', () => {
    it('throws RecordError naming a missing seq', async () => {
      await fx.running();
      await expect(readSeqs(fx.redis, fx.keys().log, [1, 9])).rejects.toThrow(/record entry 9 is missing/);
    });
  });
});
