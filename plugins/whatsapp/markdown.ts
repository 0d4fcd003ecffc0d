/**
 * Markdown (as models write it) → WhatsApp's own formatting: `*bold*`,
 * `_italic_`, `~strike~`, inline `` `code` ``, ```` ``` ```` blocks, `> ` quotes
 * and `- ` lists (which WhatsApp renders as written). Headings become bold
 * lines, links `text (url)`. WhatsApp never refuses a text for its
 * formatting, so whatever this converter does not understand shows as itself.
 */

import { html } from 'steerbot/plugin';

// Every pattern here takes time linear in the line (a reply may repeat whatever a user asked for): see `steerbot/plugin`'s `html`.
const BULLET_RE = /^(\s*)[*+]\s+(\S.*)?$/;
const QUOTE_RE = /^(\s{0,3}>\s?)(.*)$/;

/** Converts Markdown to WhatsApp formatting. */
export function markdownToWhatsApp(markdown: string): string {
  const out: string[] = [];
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const f = html.markdownFence(line);
    if (fence !== undefined) {
      // Inside a block nothing is converted; its closing fence becomes WhatsApp's.
      if (f && html.closesFence(f, fence)) {
        out.push('```');
        fence = undefined;
      } else out.push(line);
      continue;
    }
    if (f && html.fenceLanguage(f) !== undefined) {
      fence = f.marker;
      out.push('```');
      continue;
    }
    out.push(convertLine(line));
  }
  // An unclosed block (a split part may end inside one) is closed, so the rest is not all monospace.
  if (fence !== undefined) out.push('```');
  return out.join('\n');
}

function convertLine(line: string): string {
  const h = html.markdownHeading(line);
  if (h) return `*${inline(h.text).replace(/\*/g, '')}*`;
  const q = QUOTE_RE.exec(line);
  if (q) return `> ${inline(q[2]!)}`;
  // `* item` would read as bold: WhatsApp's list marker is `- `.
  const b = BULLET_RE.exec(line);
  if (b) return `${b[1]}- ${inline(b[2] ?? '')}`;
  return inline(line);
}

/** Inline formatting of one line. Code spans become placeholders first, so nothing inside them is reformatted. */
function inline(line: string): string {
  const held: string[] = [];
  const hold = (text: string) => `\uE000${held.push(text) - 1}\uE001`;
  let s = line.replace(/[\uE000\uE001]/g, '').replace(/`([^`]+)`/g, (m) => hold(m));
  // A link's text stops at a bracket and its URL at `](`, bold or strike content at its own delimiter: no scan from
  // one of many unclosed openers runs on to the end of the line.
  s = s.replace(/\[([^[\]]+)\]\(((?:[^)\s\]]|\](?!\())+)\)/g, (_m, text: string, url: string) => hold(text === url ? url : `${text} (${url})`));
  s = s
    // Italic first (`*x*` → `_x_`), so the bold that follows (`**x**` → `*x*`) is not read as italic again.
    .replace(/(^|[^\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])/g, '$1_$2_')
    .replace(/\*\*(?=\S)((?:[^*\n\r\u2028\u2029]|\*(?!\*))+?)(?<=\S)\*\*/g, '*$1*')
    .replace(/(^|[^\w])__(?=\S)((?:[^_\n\r\u2028\u2029]|_(?!_))+?)(?<=\S)__(?!\w)/g, '$1*$2*')
    .replace(/~~(?=\S)((?:[^~\n\r\u2028\u2029]|~(?!~))+?)(?<=\S)~~/g, '~$1~');
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => held[Number(i)] ?? '');
}
