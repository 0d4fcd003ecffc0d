/** JSON helpers shared by the roles. */

/** `raw` parsed as JSON; undefined when it is absent or not JSON (stored values the reader tolerates losing). */
export function parseJsonOrUndefined(raw: string | undefined): unknown {
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
