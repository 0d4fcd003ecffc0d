/**
 * Markdown (as models write it) → the HTML subset Matrix clients render in
 * `formatted_body` (`org.matrix.custom.html`): paragraphs, headings, code
 * fences and spans, bold, italic, strike, links (http, https and mailto
 * only), quotes and lists. Every character of the source is escaped before
 * any tag is added, so HTML in the text (a `<script>`) shows as text. No
 * Markdown library is among the dependencies; this converter only has to
 * be good, not perfect: the plain `body` goes with it.
 */
import { html } from 'steerbot/plugin';

/** Escapes text for HTML content and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

// Every pattern here takes time linear in the line (a reply may repeat whatever a user asked for): see `steerbot/plugin`'s `html`.
const QUOTE_RE = /^\s{0,3}>\s?(.*)$/;
const BULLET_RE = /^\s{0,3}[-*+]\s+(\S.*)?$/;
const NUMBERED_RE = /^\s{0,3}\d{1,9}[.)]\s+(\S.*)?$/;

type Group = { tag: 'p' | 'blockquote' | 'ul' | 'ol'; lines: string[] };

/** Converts Markdown to Matrix HTML. Pure. */
export function markdownToMatrixHtml(markdown: string): string {
  const out: string[] = [];
  let fence: { marker: string; lang: string; lines: string[] } | undefined;
  let group: Group | undefined;
  const flush = () => {
    if (group?.tag === 'ul' || group?.tag === 'ol') out.push(`<${group.tag}>${group.lines.map((l) => `<li>${l}</li>`).join('')}</${group.tag}>`);
    else if (group) out.push(`<${group.tag}>${group.lines.join('<br>')}</${group.tag}>`);
    group = undefined;
  };
  const add = (tag: Group['tag'], html: string) => {
    if (group?.tag !== tag) flush();
    group ??= { tag, lines: [] };
    group.lines.push(html);
  };
  for (const line of markdown.split('\n')) {
    if (fence) {
      const m = html.markdownFence(line);
      if (m && html.closesFence(m, fence.marker)) {
        out.push(preBlock(fence.lang, fence.lines));
        fence = undefined;
      } else fence.lines.push(line);
      continue;
    }
    const open = html.markdownFence(line);
    const lang = open && html.fenceLanguage(open);
    const h = html.markdownHeading(line);
    const q = QUOTE_RE.exec(line);
    const b = BULLET_RE.exec(line);
    const n = NUMBERED_RE.exec(line);
    if (open && lang !== undefined) {
      flush();
      fence = { marker: open.marker, lang, lines: [] };
    } else if (h) {
      flush();
      out.push(`<h${h.level}>${inline(h.text)}</h${h.level}>`);
    } else if (q) add('blockquote', inline(q[1]!));
    else if (b) add('ul', inline(b[1] ?? ''));
    else if (n) add('ol', inline(n[1] ?? ''));
    else if (line.trim() === '') flush();
    else add('p', inline(line));
  }
  flush();
  // An unclosed fence still renders as code (a split part may end inside one).
  if (fence) out.push(preBlock(fence.lang, fence.lines));
  return out.join('\n');
}

function preBlock(lang: string, lines: string[]): string {
  const cls = lang ? ` class="language-${escapeHtml(lang)}"` : '';
  return `<pre><code${cls}>${escapeHtml(lines.join('\n'))}</code></pre>`;
}

/** This platform's HTML for the shared inline rules (`html.inlineMarkdownHtml`). */
const DIALECT: html.HtmlDialect = { bold: 'strong', italic: 'em', strike: 'del', safeUrl: /^(https?:\/\/|mailto:)/i, escape: escapeHtml };

/** Inline formatting of one line. */
const inline = (line: string): string => html.inlineMarkdownHtml(line, DIALECT);
