/**
 * The SDK's token cache (`Cache`), one per client: the tenant access token
 * with its expiry, in memory. The SDK's default cache is one per process,
 * shared by every client of the same app id (and it keeps tokens of apps
 * that were reconfigured away).
 */
import type { Cache } from '@larksuiteoapi/node-sdk';

/** A fresh cache. Entries without an expiry never expire; `expiredTime` is ms since the epoch. */
export function tokenCache(now: () => number = Date.now): Cache {
  const values = new Map<string, { value: string; expiredTime: number | undefined }>();
  const keyOf = (key: unknown, options?: { namespace?: string }) => `${options?.namespace ?? ''}/${String(key)}`;
  return {
    async get(key, options) {
      const entry = values.get(keyOf(key, options));
      if (!entry) return undefined;
      if (entry.expiredTime !== undefined && entry.expiredTime <= now()) return undefined;
      return entry.value;
    },
    async set(key, value, expiredTime, options) {
      values.set(keyOf(key, options), { value: String(value), expiredTime });
      return true;
    },
  };
}
