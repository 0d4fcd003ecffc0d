/**
 * Markdown → Matrix HTML (`formatted_body`), pure: every block kind, and
 * HTML in the source shown as text wherever it stands.
 */
import { describe, expect, it } from 'vitest';
import { markdownToMatrixHtml } from '../../plugins/matrix/markdown.js';

describe('markdownToMatrixHtml', () => {
  it('renders fences, quotes, numbered lists and headings', () => {
    const md = ['## Plan', '1. first', '2. **second**', '', '> quoted', '> more', '```ts', 'const a = 1 < 2 && "x";', '```', 'after ~~old~~ _new_'].join('\n');
    expect(markdownToMatrixHtml(md)).toBe(
      [
        '<h2>Plan</h2>',
        '<ol><li>first</li><li><strong>second</strong></li></ol>',
        '<blockquote>quoted<br>more</blockquote>',
        '<pre><code class="language-ts">const a = 1 &lt; 2 &amp;&amp; &quot;x&quot;;</code></pre>',
        '<p>after <del>old</del> <em>new</em></p>',
      ].join('\n'),
    );
  });

  it('escapes HTML in text, code, link text and link targets, and leaves unsafe links as text', () => {
    expect(markdownToMatrixHtml('<img src=x onerror=alert(1)> `<b>` [<i>x</i>](https://e.org/"><script>)')).toBe(
      '<p>&lt;img src=x onerror=alert(1)&gt; <code>&lt;b&gt;</code> <a href="https://e.org/&quot;&gt;&lt;script&gt;">&lt;i&gt;x&lt;/i&gt;</a></p>',
    );
    expect(markdownToMatrixHtml('[x](data:text/html,<script>)')).toBe('<p>[x](data:text/html,&lt;script&gt;)</p>');
  });

  it('renders an unclosed fence as code (a split part may end inside one)', () => {
    expect(markdownToMatrixHtml('```\n<tag>')).toBe('<pre><code>&lt;tag&gt;</code></pre>');
  });
});
