import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { markdownToTelegramHtml } from '../../plugins/telegram/markdown.js';
import { parseTelegramHtml } from '../../testing/fakes/telegram-server.js';

function visible(md: string): string {
  const parsed = parseTelegramHtml(markdownToTelegramHtml(md));
  if ('error' in parsed) throw new Error(`${parsed.error} in ${markdownToTelegramHtml(md)}`);
  return parsed.text;
}

describe('markdownToTelegramHtml', () => {
  it('escapes the three HTML characters outside and inside code', () => {
    expect(markdownToTelegramHtml('a < b & c > d `x<y>&`')).toBe('a &lt; b &amp; c &gt; d <code>x&lt;y&gt;&amp;</code>');
  });

  it('formats bold, italic, strike and links, and leaves snake_case and 2*3*4 alone', () => {
    expect(markdownToTelegramHtml('**b** __b2__ *i* _i2_ ~~s~~ [t](https://x.y/?a=1&b="2")')).toBe(
      '<b>b</b> <b>b2</b> <i>i</i> <i>i2</i> <s>s</s> <a href="https://x.y/?a=1&amp;b=&quot;2&quot;">t</a>',
    );
    expect(markdownToTelegramHtml('call snake_case_name with 2*3*4')).toBe('call snake_case_name with 2*3*4');
  });

  it('does not turn unsafe link schemes into links', () => {
    expect(markdownToTelegramHtml('[x](javascript:alert(1))')).toBe('[x](javascript:alert(1))');
  });

  it('renders fenced code with its language, and an unclosed fence as code to the end', () => {
    expect(markdownToTelegramHtml('before\n```python\nprint("**no**")\n```\nafter')).toBe(
      'before\n<pre><code class="language-python">print("**no**")</code></pre>\nafter',
    );
    expect(markdownToTelegramHtml('```\n<tag>')).toBe('<pre>&lt;tag&gt;</pre>');
  });

  it('renders headings bold, quotes as blockquote and bullets as •', () => {
    expect(markdownToTelegramHtml('## Title\n> quoted\n> more\n- one\n* two')).toBe('<b>Title</b>\n<blockquote>quoted\nmore</blockquote>\n• one\n• two');
  });

  it('never produces HTML that Telegram would refuse, and keeps plain text as it is', () => {
    const piece = fc.constantFrom(
      '**',
      '__',
      '*',
      '_',
      '~~',
      '`',
      '```',
      '[',
      ']',
      '(',
      ')',
      'https://a.b',
      '<',
      '>',
      '&',
      '\n',
      '# ',
      '> ',
      '- ',
      ' ',
      'x',
      'yz',
      '\uE000',
      '0\uE001',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (parts) => {
        visible(parts.join(''));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'b', ' ', '.', ',', '\n', 'é', '中') }), (s) => {
        expect(visible(s)).toBe(s);
      }),
    );
  });
});
