/**
 * Markdown (as models write it) → Telegram HTML (`parse_mode: 'HTML'`).
 * HTML rather than MarkdownV2 because it has three characters to escape
 * instead of eighteen, so a text we did not understand still renders as
 * itself. A result Telegram still refuses is resent as plain text by the
 * outbound side; this converter only has to be good, not perfect.
 */
import { html } from 'steerbot/plugin';

/** Escapes text for Telegram HTML. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

// Every pattern here takes time linear in the line (a reply may repeat whatever a user asked for): see `steerbot/plugin`'s `html`.
const QUOTE_RE = /^\s{0,3}>\s?(.*)$/;
const BULLET_RE = /^(\s*)[-*+]\s+(\S.*)?$/;

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
      const m = html.markdownFence(line);
      if (m && html.closesFence(m, fence.marker)) {
        out.push(preBlock(fence.lang, fence.lines));
        fence = undefined;
      } else {
        fence.lines.push(line);
      }
      continue;
    }
    const open = html.markdownFence(line);
    const lang = open && html.fenceLanguage(open);
    if (open && lang !== undefined) {
      flushQuote();
      fence = { marker: open.marker, lang, lines: [] };
      continue;
    }
    const q = QUOTE_RE.exec(line);
    if (q) {
      quote.push(inline(q[1]!));
      continue;
    }
    flushQuote();
    const h = html.markdownHeading(line);
    if (h) {
      out.push(`<b>${inline(h.text)}</b>`);
      continue;
    }
    const b = BULLET_RE.exec(line);
    out.push(b ? `${b[1]}• ${inline(b[2] ?? '')}` : inline(line));
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

/** This platform's HTML for the shared inline rules (`html.inlineMarkdownHtml`). */
const DIALECT: html.HtmlDialect = { bold: 'b', italic: 'i', strike: 's', safeUrl: /^(https?:\/\/|tg:\/\/|mailto:)/i, escape: escapeHtml };

/** Inline formatting of one line. */
const inline = (line: string): string => html.inlineMarkdownHtml(line, DIALECT);
