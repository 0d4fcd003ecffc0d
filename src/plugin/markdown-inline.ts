/**
 * Inline Markdown of one line (as models write it) → the HTML of a chat
 * platform: code spans, links, bold, italic, strike. The dialects differ in
 * their tag names, the URL schemes they allow and what they escape
 * (Telegram's HTML, Matrix's `formatted_body`); the rules are one. Code spans
 * and links become placeholders first, so nothing inside them is
 * reformatted; every other character is escaped before a tag is added. Pure.
 */

/** One platform's HTML: its tag names, the link schemes it allows, and its escaping of text and attributes. */
export interface HtmlDialect {
  bold: string;
  italic: string;
  strike: string;
  /** Link URLs it allows (others stay text). */
  safeUrl: RegExp;
  /** Escapes text for its HTML. */
  escape(text: string): string;
}

/** The line's inline Markdown as `d`'s HTML. */
export function inlineMarkdownHtml(line: string, d: HtmlDialect): string {
  const held: string[] = [];
  const hold = (html: string) => `\uE000${held.push(html) - 1}\uE001`;
  // The placeholder delimiters are private-use characters; drop any the text itself carries.
  let s = line.replace(/[\uE000\uE001]/g, '').replace(/`([^`]+)`/g, (_m, code: string) => hold(`<code>${d.escape(code)}</code>`));
  s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, text: string, url: string) =>
    d.safeUrl.test(url) ? hold(`<a href="${d.escape(url).replace(/"/g, '&quot;')}">${d.escape(text)}</a>`) : m,
  );
  s = d.escape(s);
  const tag = (name: string, inner: string) => `<${name}>${inner}</${name}>`;
  // Content never holds a tag (`[^<]`), so the tags these insert cannot cross each other.
  s = s
    .replace(/\*\*(?=[^\s<])([^<]+?)(?<=[^\s<])\*\*/g, (_m, t: string) => tag(d.bold, t))
    .replace(/(^|[^\w])__(?=[^\s<])([^<]+?)(?<=[^\s<])__(?!\w)/g, (_m, p: string, t: string) => p + tag(d.bold, t))
    .replace(/~~(?=[^\s<])([^<]+?)(?<=[^\s<])~~/g, (_m, t: string) => tag(d.strike, t))
    .replace(/(^|[^\w*])\*(?=[^\s*<])([^*<]+?)(?<=[^\s*<])\*(?![\w*])/g, (_m, p: string, t: string) => p + tag(d.italic, t))
    .replace(/(^|[^\w])_(?=[^\s_<])([^_<]+?)(?<=[^\s_<])_(?!\w)/g, (_m, p: string, t: string) => p + tag(d.italic, t));
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => held[Number(i)] ?? '');
}
