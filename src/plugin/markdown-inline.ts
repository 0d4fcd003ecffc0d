/**
 * Inline Markdown of one line (as models write it) → the HTML of a chat
 * platform: code spans, links, bold, italic, strike. The dialects differ in
 * their tag names, the URL schemes they allow and what they escape
 * (Telegram's HTML, Matrix's `formatted_body`); the rules are one. Code spans
 * and links become placeholders first, so nothing inside them is
 * reformatted; every other character is escaped before a tag is added. Pure.
 *
 * A reply can quote whatever a user asked the model to repeat, and it is
 * rendered in the process's only thread: every rule here (and in the
 * platforms' block rules) takes time linear in the line. A pattern that scans
 * to the end of the line from each of many starts (an unclosed `[` or `**`),
 * or that can split one run of spaces many ways (`\s*x*\s*`, or `\s+(.*)$`
 * on a line holding a `\r`), takes seconds on one crafted line; an optional
 * part starts with a character the spaces around it cannot be.
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

/** A Markdown link `[text](url)`: the text holds no bracket, the URL no `)`, space or `](`. */
const LINK_RE = /\[([^[\]]+)\]\(((?:[^)\s\]]|\](?!\())+)\)/g;

/** The line's inline Markdown as `d`'s HTML. */
export function inlineMarkdownHtml(line: string, d: HtmlDialect): string {
  const held: string[] = [];
  const hold = (html: string) => `\uE000${held.push(html) - 1}\uE001`;
  // The placeholder delimiters are private-use characters; drop any the text itself carries.
  let s = line.replace(/[\uE000\uE001]/g, '').replace(/`([^`]+)`/g, (_m, code: string) => hold(`<code>${d.escape(code)}</code>`));
  // From each of many unclosed `[` (or `](`) the scan stops at the next one, not at the end of the line.
  s = s.replace(LINK_RE, (m, text: string, url: string) =>
    d.safeUrl.test(url) ? hold(`<a href="${d.escape(url).replace(/"/g, '&quot;')}">${d.escape(text)}</a>`) : m,
  );
  s = d.escape(s);
  const tag = (name: string, inner: string) => `<${name}>${inner}</${name}>`;
  // Content never holds a tag (`[^<]`), so the tags these insert cannot cross each other; nor its own delimiter
  // (`**` in bold), so an unclosed one is given up at the next delimiter instead of at the end of the line.
  s = s
    .replace(/\*\*(?=[^\s<])((?:[^<*]|\*(?!\*))+?)(?<=[^\s<])\*\*/g, (_m, t: string) => tag(d.bold, t))
    .replace(/(^|[^\w])__(?=[^\s<])((?:[^<_]|_(?!_))+?)(?<=[^\s<])__(?!\w)/g, (_m, p: string, t: string) => p + tag(d.bold, t))
    .replace(/~~(?=[^\s<])((?:[^<~]|~(?!~))+?)(?<=[^\s<])~~/g, (_m, t: string) => tag(d.strike, t))
    .replace(/(^|[^\w*])\*(?=[^\s*<])([^*<]+?)(?<=[^\s*<])\*(?![\w*])/g, (_m, p: string, t: string) => p + tag(d.italic, t))
    .replace(/(^|[^\w])_(?=[^\s_<])([^_<]+?)(?<=[^\s_<])_(?!\w)/g, (_m, p: string, t: string) => p + tag(d.italic, t));
  return s.replace(/\uE000(\d+)\uE001/g, (_m, i: string) => held[Number(i)] ?? '');
}

/** A Markdown heading line: its level (1 to 6) and its text, without the closing `#`s. */
export interface MarkdownHeading {
  /** 1 to 6: the number of `#`. */
  level: number;
  /** The heading's text, inline Markdown still in it. */
  text: string;
}

/**
 * The heading `line` is (`## Title ##` → level 2, `Title`), or undefined: up
 * to three spaces, one to six `#`, a space, the text; closing `#`s and the
 * spaces around them dropped. What `/^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/`
 * matches, in time linear in the line (that pattern tries every split of a
 * run of spaces: seconds on one line of 4 000).
 */
export function markdownHeading(line: string): MarkdownHeading | undefined {
  const open = /^\s{0,3}(#{1,6})\s/.exec(line);
  if (!open) return undefined;
  const rest = line.slice(open[0].length).trimStart().trimEnd();
  let end = rest.length;
  while (end > 0 && rest[end - 1] === '#') end--;
  const text = rest.slice(0, end).trimEnd();
  // The text is one line (`.` matches no line terminator); `\s`, which includes them, only frames it.
  return /[\n\r\u2028\u2029]/.test(text) ? undefined : { level: open[1]!.length, text };
}
