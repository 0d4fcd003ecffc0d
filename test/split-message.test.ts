import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { splitMessage, splitMessageSpans } from '../src/split-message.js';

/** Fence state at the end of `chunk`: the opener of a fence left open, or undefined. */
function openFenceAtEnd(chunk: string): string | undefined {
  let open: string | undefined;
  for (const line of chunk.split('\n')) {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (!m) continue;
    if (open === undefined) open = m[1]!;
    else if (m[1]![0] === open[0] && m[1]!.length >= open.length && m[2]!.trim() === '') open = undefined;
  }
  return open;
}

const word = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789é日本'.split('')), minLength: 1, maxLength: 10 }) },
  { weight: 1, arbitrary: fc.constantFrom('😀', '👍🏽', 'naïve', '—') },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('x', 'y', '😀'), minLength: 30, maxLength: 90 }) },
);
const line = fc.array(word, { minLength: 1, maxLength: 14 }).map((w) => w.join(' '));
const paragraph = fc.array(line, { minLength: 1, maxLength: 6 }).map((l) => l.join('\n'));
const codeLine = fc.tuple(fc.constantFrom('', '  ', '    '), fc.array(word, { minLength: 0, maxLength: 8 })).map(([indent, w]) => indent + w.join(' '));
const codeBlock = fc
  .tuple(fc.constantFrom(['```', '```'], ['```ts', '```'], ['~~~', '~~~'], ['````python', '````']), fc.array(codeLine, { minLength: 1, maxLength: 20 }))
  .map(([[open, close], lines]) => `${open}\n${lines.join('\n')}\n${close}`);
/** Markdown-ish replies: paragraphs and fenced code blocks. */
const reply = fc
  .array(fc.oneof({ weight: 3, arbitrary: paragraph }, { weight: 1, arbitrary: codeBlock }), { minLength: 1, maxLength: 12 })
  .chain((blocks) => fc.constantFrom('\n\n', '\n\n\n').map((sep) => blocks.join(sep)));
/** Anything at all, fences and whitespace included. */
const anyText = fc.string({ unit: fc.constantFrom('a', 'b', ' ', '\n', '\t', '`', '~', 'x', '😀', '日'), maxLength: 600 });

function checkSpans(text: string, limit: number): void {
  const spans = splitMessageSpans(text, limit);
  const chunks = splitMessage(text, limit);
  expect(chunks).toHaveLength(spans.length);
  if (text.length === 0) {
    expect(chunks).toEqual([]);
    return;
  }
  expect(spans[0]!.start).toBe(0);
  expect(spans.at(-1)!.end).toBe(text.length);
  spans.forEach((s, i) => {
    expect(chunks[i]).toBe(s.prefix + text.slice(s.start, s.end) + s.suffix);
    expect(chunks[i]!.length).toBeLessThanOrEqual(limit);
    expect(s.end).toBeGreaterThan(s.start);
    if (i > 0) {
      const prev = spans[i - 1]!;
      // Only whitespace is dropped at a cut; a fence is reopened exactly where one was closed.
      expect(text.slice(prev.end, s.start)).toMatch(/^\s*$/);
      expect(s.prefix !== '').toBe(prev.suffix !== '');
    }
  });
}

describe('splitMessage', () => {
  it('returns a text within the limit unchanged, and nothing for an empty text', () => {
    expect(splitMessage('hello', 5)).toEqual(['hello']);
    expect(splitMessage('', 5)).toEqual([]);
  });

  it('cuts at the last paragraph break that fits', () => {
    const text = 'first paragraph\n\nsecond one\nwith two lines\n\nthird';
    // A paragraph break wins over a later line break.
    expect(splitMessage(text, 40)).toEqual(['first paragraph', 'second one\nwith two lines\n\nthird']);
    expect(splitMessage(text, 45)).toEqual(['first paragraph\n\nsecond one\nwith two lines', 'third']);
  });

  it('cuts a paragraph that does not fit at a line break, then a line at a space', () => {
    expect(splitMessage('aaaa bbbb\ncccc dddd', 12)).toEqual(['aaaa bbbb', 'cccc dddd']);
    expect(splitMessage('aaaa bbbb cccc dddd', 12)).toEqual(['aaaa bbbb', 'cccc dddd']);
  });

  it('cuts a word longer than the limit, never between the halves of a surrogate pair', () => {
    expect(splitMessage('abcdefghij', 4)).toEqual(['abcd', 'efgh', 'ij']);
    expect(splitMessage('abc😀def', 4)).toEqual(['abc', '😀de', 'f']);
  });

  it('cuts before a code block rather than inside it', () => {
    const code = '```js\nconst a = 1;\nconst b = 2;\n```';
    expect(splitMessage(`Here you go:\n${code}\nThat is all.`, code.length + 2)).toEqual(['Here you go:', code, 'That is all.']);
  });

  it('closes a code block that must be split and reopens it with the same info string', () => {
    const body = Array.from({ length: 8 }, (_, i) => `  line ${i}`).join('\n');
    const chunks = splitMessage(`\`\`\`python\n${body}\n\`\`\``, 40);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.startsWith('```python\n')).toBe(true);
      expect(c.endsWith('\n```')).toBe(true);
      expect(c.length).toBeLessThanOrEqual(40);
    }
    // Indentation inside the code survives the cut.
    expect(chunks.flatMap((c) => c.split('\n').slice(1, -1))).toEqual(body.split('\n'));
  });

  it('keeps every chunk within the limit and drops nothing but whitespace at the cuts (any text)', () => {
    fc.assert(
      fc.property(anyText, fc.integer({ min: 1, max: 120 }), (text, limit) => checkSpans(text, limit)),
      { numRuns: 500 },
    );
  });

  it('keeps every chunk within the limit and drops nothing but whitespace at the cuts (markdown replies)', () => {
    fc.assert(
      fc.property(reply, fc.integer({ min: 20, max: 400 }), (text, limit) => checkSpans(text, limit)),
      { numRuns: 300 },
    );
  });

  it('leaves no code fence open at the end of a chunk', () => {
    fc.assert(
      fc.property(reply, fc.integer({ min: 30, max: 400 }), (text, limit) => {
        for (const chunk of splitMessage(text, limit)) expect(openFenceAtEnd(chunk)).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });

  it('never splits a block that fits in a chunk of its own', () => {
    fc.assert(
      fc.property(fc.array(codeBlock, { minLength: 2, maxLength: 6 }), (blocks) => {
        const limit = Math.max(...blocks.map((b) => b.length));
        const chunks = splitMessage(blocks.join('\n\n'), limit);
        for (const b of blocks) expect(chunks.some((c) => c.includes(b))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});
