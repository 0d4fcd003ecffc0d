/**
 * A `Retry-After` header (RFC 9110 §10.2.3) as a wait: delay-seconds, or an
 * HTTP date counted from `now`. Every plugin that honours a platform's retry
 * hint reads it here.
 */

/** The wait `value` asks for, in ms (a date in the past: 0); undefined when absent or neither form. `now`: ms since the epoch. */
export function retryAfterMs(value: string | null | undefined, now = Date.now()): number | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) || !/[a-z]/i.test(v) ? undefined : Math.max(0, at - now);
}
