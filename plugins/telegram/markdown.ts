/**
 * Markdown (as models write it) → Telegram HTML (`parse_mode: 'HTML'`).
 * HTML rather than MarkdownV2 because it has three characters to escape
 * instead of eighteen, so a text we did not understand still renders as
 * itself. A result Telegram still refuses is resent as plain text by the
 * outbound side; this converter only has to be good, not perfect.
 */

/** Escapes text for Telegram HTML. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const FENCE_RE = /^\s*(`{3,}|~{3,})\s*([A-Za-z0-9_+#.-]*)\s*$/;
const HEADING_RE = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/;
const QUOTE_RE = /^\s{0,3}>\s?(.*)$/;
const BULLET_RE = /^(\s*)[-*+]\s+(.*)$/;

/** Converts Markdown to Telegram HTML: fences, inline code, bold, italic, strike, links, headings, quotes, bullets. */
export function markdownToTelegramHtml(markdown: string): string {
  const out: string[] = [];
  let fence: { marker: string; lang: string; lines: string[] } | undefined;
  let quote: string[] = [];
  const flushQuote = () => {
    if (quote.length > 0) out.push(`<blockquote>${quote.join('\n')}</blockquote>`);
    quote = [];
  };
  for (const line of markdown.split('\n')) {
    if (fence) {
      const m = FENCE_RE.exec(line);
      if (m && m[2] === '' && m[1]![0] === fence.marker[0] && m[1]!.length >= fence.marker.length) {
        out.push(preBlock(fence.lang, fence.lines));
        fence = undefined;
      } else {
        fence.lines.push(line);
      }
      continue;
    }
    const open = FENCE_RE.exec(line);
    if (open) {
      flushQuote();
      fence = { marker: open[1]!, lang: open[2]!, lines: [] };
      continue;
    }
    const q = QUOTE_RE.exec(line);
    if (q) {
      quote.push(inline(q[1]!));
      continue;
    }
    flushQuote();
    const h = HEADING_RE.exec(line);
    if (h) {
      out.push(`<b>${inline(h[1]!)}</b>`);
      continue;
    }
    const b = BULLET_RE.exec(line);
    out.push(b ? `${b[1]}• ${inline(b[2]!)}` : inline(line));
  }
  flushQuote();
  // An unclosed fence still renders as code (a split part may end inside one).
  if (fence) out.push(preBlock(fence.lang, fence.lines));
  return out.join('\n');
}

function preBlock(lang: string, lines: string[]): string {
  const code = escapeHtml(lines.join('\n'));
  return lang ? `<pre><code class="language-${escapeHtml(lang)}">${code}</code></pre>` : `<pre>${code}</pre>`;
}

const SAFE_URL_RE = /^(https?:\/\/|tg:\/\/|mailto:)/i;

/** Inline formatting of one line. Code spans and links become placeholders first, so nothing inside them is reformatted. */
function inline(line: string): string {
  const held: string[] = [];
  const hold = (html: string) => `\uE000${held.push(html) - 1}\uE001`;
  // The placeholder delimiters are private-use characters; drop any the text itself carries.
  let s = line.replace(/[\uE000\uE001]/g, '').replace(/`([^`]+)`/g, (_m, code: string) => hold(`<code>${escapeHtml(code)}</code>`));
  s = escapeHtml(s);
  s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, text: string, url: string) =>
    SAFE_URL_RE.test(url) ? hold(`<a href="${url.replace(/"/g, '&quot;')}">${text}</a>`) : m,
  );
  // Content never holds a tag (`[^<]`), so the tags these insert cannot cross each other.
  s = s
    .replace(/\*\*(?=[^\s<])([^<]+?)(?<=[^\s<])\*\*/g, '<b>$1</b>')
    .replace(/(^|[^\w])__(?=[^\s<])([^<]+?)(?<=[^\s<])__(?!\w)/g, '$1<b>$2</b>')
    .replace(/~~(?=[^\s<])([^<]+?)(?<=[^\s<])~~/g, '<s>$1</s>')
    .replace(/(^|[^\w*])\*(?=[^\s*<])([^*<]+?)(?<=[^\s*<])\*(?![\w*])/g, '$1<i>$2</i>')
    .replace(/(^|[^\w])_(?=[^\s_<])([^_<]+?)(?<=[^\s_<])_(?!\w)/g, '$1<i>$2</i>');
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => held[Number(i)] ?? '');
}
