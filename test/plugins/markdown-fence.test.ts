/**
 * The kit's code fence rule (`html.markdownFence`, `html.closesFence`), shared by the chat platforms' Markdown
 * converters and the reply splitter: a fence is a whole run of three or more backticks or tildes; a block ends at
 * a bare run of the same character, at least as long.
 */
import { describe, expect, it } from 'vitest';
import { html } from '../../src/plugin/kit.js';

const fence = (line: string) => html.markdownFence(line);

describe('markdownFence', () => {
  it('reads the white space before the fence, the whole run, and the rest of the line as it is', () => {
    expect(fence('```ts')).toEqual({ indent: '', marker: '```', rest: 'ts' });
    expect(fence('  ~~~~ py \r')).toEqual({ indent: '  ', marker: '~~~~', rest: ' py \r' });
    expect(fence('`````')).toEqual({ indent: '', marker: '`````', rest: '' });
    expect(fence('```~~~')).toEqual({ indent: '', marker: '```', rest: '~~~' });
  });

  it('is no fence for fewer than three, or for text before the run', () => {
    for (const line of ['``', '~~ x', 'a ```', '', '  ', '\u2028']) expect(fence(line), JSON.stringify(line)).toBeUndefined();
  });

  it('reads a line of many spaces, or of many backticks, in one pass', () => {
    expect(fence(`${' '.repeat(100_000)}x`)).toBeUndefined();
    expect(fence('`'.repeat(100_000))?.marker.length).toBe(100_000);
  });
});

describe('closesFence', () => {
  const closes = (line: string, opener: string) => {
    const f = fence(line);
    return f !== undefined && html.closesFence(f, opener);
  };

  it('closes on the same character, at least as many, with only white space around it', () => {
    expect(closes('```', '```')).toBe(true);
    expect(closes('  `````  \r', '```')).toBe(true);
    expect(closes('~~~~', '~~~')).toBe(true);
  });

  it('leaves the block open for a shorter run, the other character, or an info string', () => {
    expect(closes('```', '````')).toBe(false);
    expect(closes('~~~', '```')).toBe(false);
    expect(closes('``` ts', '```')).toBe(false);
    expect(closes('```x', '```')).toBe(false);
  });
});
