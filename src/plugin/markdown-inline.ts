/**
 * Inline Markdown of one line (as models write it) → the HTML of a chat
 * platform: code spans, links, bold, italic, strike. The dialects differ in
 * their tag names, the URL schemes they allow and what they escape
 * (Telegram's HTML, Matrix's `formatted_body`); the rules are one. Code spans
 * and links become placeholders first, so nothing inside them is
 * reformatted; every other character is escaped before a tag is added. The
 * line rules the platforms' block converters share are here too: a heading,
 * a code fence. Pure.
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

/** A code fence: the line a fenced block of code opens or closes with. */
export interface MarkdownFence {
  /** The white space before the fence characters. */
  indent: string;
  /** The fence characters: the line's whole run of three or more backticks, or of tildes (`"```"`, `"~~~~"`). */
  marker: string;
  /** The rest of the line, as it is: an opening fence's info string (its language), with the white space around it. */
  rest: string;
}

/**
 * The fence `line` starts with (after any white space), or undefined. Whether it opens a block depends on
 * `rest` (a platform may allow a language only, CommonMark anything but a backtick after backticks); inside a
 * block, `closesFence` says whether it ends it.
 */
export function markdownFence(line: string): MarkdownFence | undefined {
  // Anchored, and the run after the spaces cannot be a space: one try, each space looked at once or twice.
  const m = /^(\s*)(`{3,}|~{3,})/.exec(line);
  return m ? { indent: m[1]!, marker: m[2]!, rest: line.slice(m[0].length) } : undefined;
}

/**
 * The language an opening fence names (`''`: none), when what follows its marker is a language word or
 * nothing; undefined when it is other text, which a platform without CommonMark's info strings reads as no fence.
 */
export function fenceLanguage(fence: MarkdownFence): string | undefined {
  const lang = fence.rest.trim();
  return /^[A-Za-z0-9_+#.-]*$/.test(lang) ? lang : undefined;
}

/**
 * Whether `fence` closes the block a fence `opener` (its marker) opened: the same character, at least as many
 * of it, nothing but white space after it. A shorter run, the other character or an info string is the
 * block's content.
 */
export function closesFence(fence: MarkdownFence, opener: string): boolean {
  return fence.marker[0] === opener[0] && fence.marker.length >= opener.length && fence.rest.trim() === '';
}
