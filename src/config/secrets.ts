/**
 * The secret values this process knows from declarations: settings a plugin
 * (or the core) declares `secret: true`, whatever they are named. Redaction
 * follows the declaration, not a list of key names: `redactSecrets` (so every
 * steerbot error), every logger's lines and `check-config` remove these
 * values wherever they appear. The composition declares them when it loads a
 * configuration; a value is never forgotten (a secret stays one).
 */

/** Shortest declared value removed from inside longer text; shorter ones would match everywhere (an exact setting is still redacted). */
export const MIN_SCRUBBED_SECRET_CHARS = 4;

const declared = new Set<string>();
let scrubbed: readonly string[] = [];

/** Declares secret values (empty strings are ignored). */
export function declareSecrets(values: Iterable<string>): void {
  let added = false;
  for (const v of values) {
    if (v.length === 0 || declared.has(v)) continue;
    declared.add(v);
    added = true;
  }
  // Longest first: a secret that contains another is replaced whole.
  if (added) scrubbed = [...declared].filter((v) => v.length >= MIN_SCRUBBED_SECRET_CHARS).sort((a, b) => b.length - a.length);
}

/** Whether `value` is a declared secret (the whole string). */
export function isDeclaredSecret(value: string): boolean {
  return declared.has(value);
}

/** Declared values long enough to remove from inside text, longest first. The array is replaced, never changed, when one is declared. */
export function scrubbedSecrets(): readonly string[] {
  return scrubbed;
}
