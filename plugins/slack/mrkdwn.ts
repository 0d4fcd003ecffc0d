/**
 * Markdown (what models write) → Slack's `mrkdwn` (pure). Slack's format
 * is not Markdown: bold is `*b*`, italic `_i_`, strike `~s~`, links
 * `<url|text>`, no headings; `&`, `<` and `>` must be escaped everywhere.
 * Code blocks and code spans are kept as they are (only escaped).
 */

/**
 * `s` as Slack text that is shown as written: `&`, `<` and `>` escaped, so
 * nothing in it is read as markup (`<!channel>`, `<!here>`, `<@U…>` would
 * notify people, `<url|text>` hides a link). Plain text the bot sends goes
 * through it too.
 */
export const escapeText = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Inline formatting of one stretch of text without code. */
function inline(s: string): string {
  return (
    escapeText(s)
      // Links first: their text may hold formatting, their URL must not be touched.
      // Linear on any line: the text holds no `[`, the URL no `[` (a line of `[a` or `[a](http://` repeated fails at once).
      .replace(/\[([^[\]\n]+)\]\((https?:\/\/[^)\s[]+)\)/g, (_m, text: string, url: string) => `<${url.replace(/\|/g, '%7C')}|${text}>`)
      .replace(/\*\*\*([^*\n]+)\*\*\*/g, '*_$1_*')
      // Italic `*i*` → `_i_` before bold makes `*b*`, so the bold result is not read as italic.
      .replace(/(^|[^*\w])\*(?!\s)([^*\n]+?)\*(?![*\w])/g, '$1_$2_')
      .replace(/\*\*(?!\s)([^*\n]+?)\*\*/g, '*$1*')
      .replace(/__(?!\s)([^_\n]+?)__/g, '*$1*')
      .replace(/~~(?!\s)([^~\n]+?)~~/g, '~$1~')
  );
}

/** One line outside code blocks: headings bold, quotes kept, bullets `•`, code spans kept. */
function line(l: string): string {
  // `s`: the rest is taken whole, whatever it holds (a run of spaces before a `\r` made `\s+(.*)$` backtrack for seconds).
  const heading = /^#{1,6}\s(.*)$/s.exec(l);
  if (heading) return `*${inlineWithCode(heading[1]!.trimStart().replace(/\*\*/g, ''))}*`;
  // A quote's `>` is Slack's too: kept unescaped.
  const quote = /^>\s?(.*)$/.exec(l);
  if (quote) return `> ${inlineWithCode(quote[1]!)}`;
  const bullet = /^(\s*)[-*+]\s(.*)$/s.exec(l);
  if (bullet) return `${bullet[1]}• ${inlineWithCode(bullet[2]!.trimStart())}`;
  return inlineWithCode(l);
}

function inlineWithCode(l: string): string {
  return l
    .split(/(`[^`\n]+`)/)
    .map((part, i) => (i % 2 === 1 ? escapeText(part) : inline(part)))
    .join('');
}

/** Converts Markdown text to Slack mrkdwn. */
export function markdownToMrkdwn(md: string): string {
  const out: string[] = [];
  let inFence = false;
  for (const l of md.split('\n')) {
    if (/^\s*```/.test(l)) {
      // Slack shows no language tag: an opening fence is just ```.
      out.push('```');
      inFence = !inFence;
      continue;
    }
    out.push(inFence ? escapeText(l) : line(l));
  }
  return out.join('\n');
}
