import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { readStored, stamp, storedShape } from '../../src/redis/stored.js';

// A shape at version 3: v1 had `name`, v2 split it into `first`/`last`, v3 added a required `tags`.
const person = storedShape({
  name: 'person',
  version: 3,
  field: 'v',
  schema: z.object({ first: z.string(), last: z.string(), tags: z.array(z.string()) }),
  upcasters: {
    1: ({ name, ...rest }) => {
      const [first = '', ...last] = String(name).split(' ');
      return { ...rest, first, last: last.join(' ') };
    },
    2: (doc) => ({ ...doc, tags: [] }),
  },
});

describe('stored shapes', () => {
  it('upcasts every older version, an unstamped document being version 1', () => {
    const want = { kind: 'ok', value: { first: 'Ada', last: 'King Lovelace', tags: [] } };
    expect(readStored(person, { name: 'Ada King Lovelace' })).toEqual(want);
    expect(readStored(person, { v: 1, name: 'Ada King Lovelace' })).toEqual(want);
    expect(readStored(person, { v: 2, first: 'Ada', last: 'King Lovelace' })).toEqual(want);
    expect(readStored(person, { v: 3, first: 'Ada', last: 'King Lovelace', tags: [] })).toEqual(want);
  });

  it("skips a newer release's version, and refuses a document that does not match the version it claims", () => {
    expect(readStored(person, { v: 4, anything: true })).toEqual({ kind: 'newer', version: 4 });
    expect(readStored(person, { v: 3, first: 'Ada' })).toMatchObject({ kind: 'invalid', reason: expect.stringContaining('person (version 3)') });
    expect(readStored(person, { v: 'x' })).toMatchObject({ kind: 'invalid', reason: expect.stringContaining('bad v') });
    expect(readStored(person, { v: 0 })).toMatchObject({ kind: 'invalid' });
    expect(readStored(person, ['a'])).toMatchObject({ kind: 'invalid', reason: 'person is not a JSON object' });
  });

  it('stamps what it writes with its version, and needs an upcaster for every older one', () => {
    expect(stamp(person, { first: 'A', last: 'B', tags: [] })).toEqual({ first: 'A', last: 'B', tags: [], v: 3 });
    expect(() => storedShape({ name: 'gap', version: 3, field: 'v', schema: z.object({}), upcasters: { 1: (d) => d } })).toThrow(
      'stored shape gap: no upcaster from version 2',
    );
  });
});
