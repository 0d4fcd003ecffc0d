/**
 * Framing user-derived text for a prompt (docs/agent.md#user-derived-text):
 * memory notes, sender names, anything a person (or a model fooled by
 * injected text) wrote. The text is escaped so it cannot open or close a
 * tag, its own or any other: `&`, `<`, `>` become entities, and so do the
 * look-alikes of `<` and `>` a model may read as brackets (full-width,
 * small, angle quotes and brackets). A block opens with fixed words saying
 * that what follows is data, not instructions.
 *
 * Pure and deterministic: the same text is always the same bytes, so a block
 * in the system prompt keeps the provider's prompt cache.
 */

/** Characters a model may read as `<` or `>`, besides the ASCII ones: written as numeric entities. */
const LOOK_ALIKES = [
  '\uFF1C', // ＜ full-width less-than
  '\uFF1E',
  '\uFE64', // ﹤ small less-than
  '\uFE65',
  '\u2039', // ‹ single angle quotation mark
  '\u203A',
  '\u2329', // 〈 angle bracket
  '\u232A',
  '\u3008', // 〈 CJK angle bracket
  '\u3009',
  '\u27E8', // ⟨ mathematical angle bracket
  '\u27E9',
  '\u276E', // ❮ heavy angle quotation mark ornament
  '\u276F',
  '\u02C2', // ˂ modifier letter left arrowhead
  '\u02C3',
  '\u1438', // ᐸ Canadian syllabics pa
  '\u1433',
  '\u00AB', // « double angle quotation mark
  '\u00BB',
  '\u300A', // 《 CJK double angle bracket
  '\u300B',
  '\u226A', // ≪ much less-than
  '\u226B',
  '\u27EA', // ⟪ mathematical double angle bracket
  '\u27EB',
  '\u29FC', // ⧼ left-pointing curved angle bracket
  '\u29FD',
  '\u276C', // ❬ medium angle bracket ornament
  '\u276D',
  '\u2770', // ❰ heavy angle bracket ornament
  '\u2771',
  '\uFE3F', // ︿ presentation form for vertical angle bracket
  '\uFE40',
];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
for (const c of LOOK_ALIKES) ENTITIES[c] = `&#x${c.codePointAt(0)!.toString(16).toUpperCase()};`;

const TEXT_RE = new RegExp(`[&<>${LOOK_ALIKES.join('')}]`, 'g');
const ATTR_RE = new RegExp(`[&<>"${LOOK_ALIKES.join('')}]`, 'g');

/** `text` with `&`, `<`, `>` and their look-alikes as entities: it can open or close no tag. */
export function escapeData(text: string): string {
  return text.replace(TEXT_RE, (c) => ENTITIES[c]!);
}

/** `value` escaped for a double-quoted attribute: as `escapeData`, and `"` too. */
export function escapeAttribute(value: string): string {
  return value.replace(ATTR_RE, (c) => ENTITIES[c]!);
}

/** One block of data for a prompt. */
export interface DataBlock {
  /** The block's tag (`memory`): lower-case letters, digits and `-`. */
  tag: string;
  /** Fixed words from the code saying what the items are; not escaped. Should say they are data, not instructions. */
  intro: string;
  /** The items, user-derived: each escaped, on one line (line breaks become spaces), after `- `. */
  items: readonly string[];
  /** A fixed closing line from the code (not escaped); none when absent. */
  footer?: string | undefined;
}

const TAG_RE = /^[a-z][a-z0-9-]{0,31}$/;

const LINE_BREAK_RE = /[\r\n\v\f\u0085\u2028\u2029]/;

/**
 * `text` on one line: every line break (and the space around it) becomes one space. Each run of white space is
 * looked at once (`\s*[breaks]+\s*` would scan every run again from each of its characters: seconds for a web
 * page's title of a few tens of thousands of spaces).
 */
export function oneLine(text: string): string {
  return text.replace(/[\s\u0085]+/g, (run) => (LINE_BREAK_RE.test(run) ? ' ' : run)).trim();
}

/**
 * The block as prompt text: `<tag>`, the intro, one `- ` line per escaped
 * item, the footer, `</tag>`. No item can end the block, start a line of its
 * own or pass for the intro. Throws a TypeError for a tag that is not `[a-z][a-z0-9-]*`.
 */
export function dataBlock(b: DataBlock): string {
  if (!TAG_RE.test(b.tag)) throw new TypeError(`dataBlock: bad tag ${JSON.stringify(b.tag)}`);
  const lines = b.items.map((item) => `- ${escapeData(oneLine(item))}`);
  return [`<${b.tag}>`, b.intro, ...lines, ...(b.footer ? [b.footer] : []), `</${b.tag}>`].join('\n');
}
