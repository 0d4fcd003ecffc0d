/** Redis helpers for our tests: the URL global setup provides, plus the test kit's prefix and cleanup. */
import { inject } from 'vitest';

export { cleanupPrefix, testPrefix } from '../../testing/redis.js';

/** URL of the test Redis (provided by `test/global-setup.ts`). */
export function redisUrl(): string {
  return inject('redisUrl');
}
