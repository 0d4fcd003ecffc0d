/** The wait before retry `attempt` (1-based): `baseMs`, doubled per attempt, at most `maxMs`. */
export function backoffMs(attempt: number, baseMs: number, maxMs = Number.POSITIVE_INFINITY): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), maxMs);
}
