/** `retryAfterMs`: the one reading of a platform's `Retry-After` hint every plugin uses. */
import { describe, expect, it } from 'vitest';
import { retryAfterMs } from '../src/http/retry-after.js';

const NOW = Date.UTC(2026, 11, 7, 12, 0, 0);

describe('retryAfterMs', () => {
  it('reads delay-seconds, whole or not', () => {
    expect(retryAfterMs('3', NOW)).toBe(3000);
    expect(retryAfterMs(' 0 ', NOW)).toBe(0);
    expect(retryAfterMs('1.5', NOW)).toBe(1500);
  });

  it('reads an HTTP date from now, and a date in the past as no wait', () => {
    expect(retryAfterMs('Mon, 07 Dec 2026 12:00:30 GMT', NOW)).toBe(30_000);
    expect(retryAfterMs('Mon, 07 Dec 2026 11:00:00 GMT', NOW)).toBe(0);
  });

  it('is undefined when absent or neither form', () => {
    for (const v of [undefined, null, '', '  ', '-1', 'soon', '1e3', '12abc']) expect(retryAfterMs(v, NOW)).toBeUndefined();
  });
});
