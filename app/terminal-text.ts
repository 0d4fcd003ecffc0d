/**
 * Text of other people's choosing as the CLI prints it. A display name or a
 * message may hold terminal control sequences: ESC sequences that retitle the
 * window, clear or rewrite the screen, or set the clipboard (OSC 52), a
 * carriage return or line break that overprints or forges a line, bidirectional
 * overrides that show text in another order. The operator's terminal acts on
 * them, so the CLI writes each such character as a visible `\uXXXX` escape.
 */

/** Control characters (C0, DEL, C1), line and paragraph separators, and bidirectional formatting characters. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is what this pattern is for.
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** The same outside C0: what `JSON.stringify` leaves unescaped inside a string. */
const JSON_RAW_CONTROL_RE = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const unicodeEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `text` with every control character written as `\uXXXX`: one line, shown as it is, acting on nothing. */
export function printable(text: string): string {
  return text.replace(CONTROL_RE, unicodeEscape);
}

/**
 * A piece of JSON text (`JSON.stringify` output, whose structure is ASCII) with the control characters it leaves raw
 * inside strings written as `\uXXXX` escapes: the same JSON value, safe to show in a terminal.
 */
export function printableJson(json: string): string {
  return json.replace(JSON_RAW_CONTROL_RE, unicodeEscape);
}
