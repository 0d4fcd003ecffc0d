/** JSON helpers shared by the roles, and the one nesting limit on JSON that comes from outside the process. */

/**
 * Deepest nesting of arrays and objects taken in JSON from outside the
 * process: request bodies, an external agent's events, a model's tool-call
 * input. zod, `JSON.stringify`, cloning and much else walk a value
 * recursively, so a value nested some thousands deep (a few KB of `[`)
 * overflows the stack wherever it is walked first. No platform's delivery,
 * protocol message or API body comes near this depth.
 */
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/** Index of the `"` that closes the string opening at `start`; the text's length when none does. */
function stringEnd(text: string, start: number): number {
  for (let i = text.indexOf('"', start + 1); i !== -1; i = text.indexOf('"', i + 1)) {
    let backslashes = 0;
    for (let j = i - 1; text.charCodeAt(j) === BACKSLASH; j--) backslashes++;
    if (backslashes % 2 === 0) return i;
  }
  return text.length;
}

/**
 * Whether `text` nests arrays and objects deeper than `maxDepth` (brackets
 * inside strings do not count). One linear scan that builds nothing, so it
 * is cheap to run before `JSON.parse`; text that is not JSON is left to the parser.
 */
export function jsonNestedDeeper(text: string, maxDepth = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) i = stringEnd(text, i);
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/**
 * JSON text from outside the process, parsed: the value, or why not
 * (`problem`), with words that finish a sentence about the text
 * (`body is ${message}`).
 */
export type ParsedJson = { ok: true; value: unknown } | { ok: false; problem: 'invalid' | 'too-deep'; message: string };

/**
 * Parses JSON that came from outside the process. Nesting deeper than
 * `maxDepth` (default `MAX_JSON_DEPTH`) is refused before anything is parsed.
 */
export function parseJson(text: string, maxDepth = MAX_JSON_DEPTH): ParsedJson {
  if (jsonNestedDeeper(text, maxDepth)) return { ok: false, problem: 'too-deep', message: `nested deeper than ${maxDepth} levels of arrays and objects` };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, problem: 'invalid', message: 'not valid JSON' };
  }
}

/** `raw` parsed as JSON; undefined when it is absent or not JSON (stored values the reader tolerates losing). */
export function parseJsonOrUndefined(raw: string | undefined): unknown {
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
