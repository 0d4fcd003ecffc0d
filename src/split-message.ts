/**
 * Splits a reply into chunks a platform accepts (Telegram 4096 characters,
 * Discord 2000). Each cut is at the best boundary that fits: a blank line,
 * else a line break, else a space, outside code fences; only when none fits
 * is a fenced block split — at a line break, closing the fence at the end of
 * the chunk and reopening it (same info string) at the start of the next —
 * and only when nothing else fits is a word cut. Nothing is ever dropped
 * except the whitespace at a cut. Lengths are UTF-16 code units (what
 * `String.length` and the Telegram / Discord limits count).
 */

import { closesFence, type MarkdownFence, markdownFence } from './plugin/markdown-inline.js';

/** One chunk: `prefix + text.slice(start, end) + suffix`. */
export interface ChunkSpan {
  /** First character of the original text in this chunk. */
  start: number;
  /** One past the last character of the original text in this chunk. */
  end: number;
  /** Fence line reopened at the start (`"```ts\n"`), or `''`. */
  prefix: string;
  /** Fence closed at the end (`"\n```"`), or `''`. */
  suffix: string;
}

interface Fence {
  /** Index of the first fence character of the opening line. */
  start: number;
  /** The opening line from its first fence character, e.g. "```ts". */
  opener: string;
  /** The fence characters of the opener, e.g. "```" — also what closes it. */
  marker: string;
  /** Index of the newline that ends the opening line. */
  openerEnd: number;
  /** Index where the closing line starts (text length when unclosed). */
  closeStart: number;
  /** Index where the closing line ends, before its newline (Infinity when unclosed: the fence runs to the end). */
  closeEnd: number;
}

// CommonMark's limits on top of the chat platforms' rule (`markdownFence`): up to three spaces before a fence, only
// spaces and tabs after a closing one; an info string is one line (what `.` matches).
const INDENT_RE = /^ {0,3}$/;
const BLANK_RE = /^[ \t]*$/;
const INFO_RE = /^[^\r\u2028\u2029]*$/;

/** The fence that opens a block at `line`: a backtick fence's info string may not contain backticks. */
function openingFence(line: string): MarkdownFence | undefined {
  const f = markdownFence(line);
  return f && INDENT_RE.test(f.indent) && INFO_RE.test(f.rest) && !(f.marker[0] === '`' && f.rest.includes('`')) ? f : undefined;
}

/** Whether `line` closes the block `marker` opened. */
function closesBlock(line: string, marker: string): boolean {
  const f = markdownFence(line);
  return f !== undefined && closesFence(f, marker) && INDENT_RE.test(f.indent) && BLANK_RE.test(f.rest);
}

/** Finds the fenced code blocks (CommonMark-style ``` / ~~~ fences). */
function findFences(text: string): Fence[] {
  const fences: Fence[] = [];
  let open: Omit<Fence, 'closeStart' | 'closeEnd'> | undefined;
  let lineStart = 0;
  while (lineStart <= text.length) {
    const nl = text.indexOf('\n', lineStart);
    const lineEnd = nl === -1 ? text.length : nl;
    const line = text.slice(lineStart, lineEnd).replace(/\r$/, '');
    if (open) {
      if (closesBlock(line, open.marker)) {
        fences.push({ ...open, closeStart: lineStart, closeEnd: lineStart + line.length });
        open = undefined;
      }
    } else {
      const f = openingFence(line);
      // A fence needs a body line.
      if (f && nl !== -1) open = { start: lineStart + f.indent.length, opener: line.slice(f.indent.length).trimEnd(), marker: f.marker, openerEnd: nl };
    }
    if (nl === -1) break;
    lineStart = nl + 1;
  }
  if (open) fences.push({ ...open, closeStart: text.length, closeEnd: Infinity });
  return fences;
}

/**
 * Index of the last fence that starts at or before `pos`, or -1. Fences are in order and do not overlap, so a binary
 * search: a reply of thousands of fences (a model asked to repeat one) is not scanned from its start at every cut.
 */
function lastFenceFrom(fences: Fence[], pos: number): number {
  let lo = 0;
  let hi = fences.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (fences[mid]!.start <= pos) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** The fence whose body contains position `pos` (a cut between `pos - 1` and `pos`), if any: only the last one starting by `pos` can. */
function fenceAt(fences: Fence[], pos: number): Fence | undefined {
  const f = fences[lastFenceFrom(fences, pos)];
  return f && pos > f.openerEnd && pos < f.closeStart ? f : undefined;
}

/** True when the whitespace run [a, b) touches no fence: the last one starting before `b` ends by `a` (fences end in order). */
function outsideFences(fences: Fence[], a: number, b: number): boolean {
  const f = fences[lastFenceFrom(fences, b - 1)];
  return !f || a >= f.closeEnd;
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/**
 * Where each chunk of `splitMessage` comes from. Every chunk is at most
 * `limit` long; consecutive spans are in order and what lies between them
 * is whitespace only.
 */
export function splitMessageSpans(text: string, limit: number): ChunkSpan[] {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  if (text.length === 0) return [];
  if (text.length <= limit) return [{ start: 0, end: text.length, prefix: '', suffix: '' }];
  // A fence whose opener and closer leave no room for content cannot be kept balanced: treat it as text.
  const fences = findFences(text).filter((f) => f.opener.length + f.marker.length + 3 <= limit);
  const spans: ChunkSpan[] = [];
  let pos = 0;
  for (;;) {
    const reopened = fenceAt(fences, pos);
    const prefix = reopened ? `${reopened.opener}\n` : '';
    if (prefix.length + text.length - pos <= limit) {
      spans.push({ start: pos, end: text.length, prefix, suffix: '' });
      return spans;
    }
    const cut = bestCut(text, fences, pos, limit - prefix.length);
    const inside = fenceAt(fences, cut.end);
    spans.push({ start: pos, end: cut.end, prefix, suffix: inside && cut.inFence ? `\n${inside.marker}` : '' });
    pos = cut.next;
  }
}

interface Cut {
  /** The chunk ends here (exclusive). */
  end: number;
  /** The next chunk starts here; text between is whitespace. */
  next: number;
  /** The cut is inside a fence body: close and reopen it. */
  inFence: boolean;
}

/** The best cut of `text` from `pos` for a chunk of at most `budget` characters of original text (plus a closing fence when it ends inside one). */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the cut preference order (paragraph, line, sentence, word, hard cut) with fence handling, kept together so the order is visible
function bestCut(text: string, fences: Fence[], pos: number, budget: number): Cut {
  const limitEnd = pos + budget;
  // Best candidate per class: 0 paragraph, 1 line, 2 word (all outside fences), 3 line inside a fence.
  const best: Array<Cut | undefined> = [undefined, undefined, undefined, undefined];
  const ws = /\s+/g;
  ws.lastIndex = pos;
  for (let m = ws.exec(text); m && m.index <= limitEnd; m = ws.exec(text)) {
    const a = m.index;
    const b = a + m[0].length;
    if (a > pos && b < text.length && outsideFences(fences, a, b)) {
      const first = m[0].indexOf('\n');
      // Keep the next line's indentation; drop the rest of the run.
      const next = first >= 0 ? a + m[0].lastIndexOf('\n') + 1 : b;
      // Two line breaks or more: a paragraph (0), one: a line (1), none: a word (2).
      best[first < 0 ? 2 : m[0].indexOf('\n', first + 1) < 0 ? 1 : 0] = { end: a, next, inFence: false };
    }
    // Line breaks inside a fence body: the chunk gets "\n" + marker appended, so it must leave room for that.
    for (let i = m[0].indexOf('\n'); i !== -1; i = m[0].indexOf('\n', i + 1)) {
      const nl = a + i;
      // Past the chunk's end none fits (a run of blank lines may go on for many chunks).
      if (nl >= limitEnd) break;
      const f = fenceAt(fences, nl);
      if (!f || nl <= f.openerEnd + 1 || nl + 1 >= f.closeStart || nl <= pos) continue;
      if (nl + 1 + f.marker.length <= limitEnd) best[3] = { end: nl, next: nl + 1, inFence: true };
    }
  }
  const found = best.find((c) => c !== undefined);
  if (found) return found;
  // Nothing fits: cut a word (or a code line) at the limit, never inside a fence's opening or closing line.
  let end = limitEnd;
  // Fences that ended before `pos` change nothing.
  for (let i = Math.max(0, lastFenceFrom(fences, pos)); i < fences.length; i++) {
    const f = fences[i]!;
    if (f.start >= end) break;
    if (end <= f.openerEnd && f.start > pos) end = f.start;
    else if (end >= f.closeStart && end < f.closeEnd) end = f.closeStart - 1 > f.openerEnd ? f.closeStart - 1 : f.start > pos ? f.start : end;
  }
  // Leave room for the closing fence line.
  const f = fenceAt(fences, end);
  if (f) end = Math.max(pos + 1, end - f.marker.length - 1);
  if (end - 1 > pos && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
  return { end, next: end, inFence: fenceAt(fences, end) !== undefined };
}

/**
 * Splits `text` into chunks of at most `limit` characters, at paragraph,
 * then line, then word boundaries, keeping code fences balanced (a fenced
 * block that must be split is closed at the end of a chunk and reopened with
 * the same info string at the start of the next). Never truncates: the
 * chunks, without the added fence lines, joined with the whitespace dropped
 * at the cuts, give back `text`. Returns `[]` for an empty text.
 */
export function splitMessage(text: string, limit: number): string[] {
  return splitMessageSpans(text, limit).map((s) => s.prefix + text.slice(s.start, s.end) + s.suffix);
}
