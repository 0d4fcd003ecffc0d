/**
 * The keys Bot Service signs activity tokens with: the JSON Web Key Set it
 * publishes (`botFrameworkKeysUrl`), fetched when first needed and kept for a
 * day. A key id the set does not hold (Bot Service rolled its keys) fetches
 * it again, at most once a minute, so tokens naming made-up key ids cannot
 * make the host hammer the key endpoint.
 */
import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { fetchFile } from 'steerbot/plugin';
import { z } from 'zod';

/** Largest key set read, in bytes (Bot Service's is a few KB). */
const MAX_KEY_SET_BYTES = 256 * 1024;

/** How long a fetched key set is used before it is fetched again, in ms. */
const KEEP_MS = 24 * 3600_000;
/** Least time between two fetches, in ms. */
const REFETCH_MS = 60_000;

const keySetSchema = z.object({
  keys: z.array(z.looseObject({ kty: z.string(), kid: z.string().max(256).optional(), use: z.string().optional() })).max(100),
});

/** Options of `SigningKeys`. */
export interface SigningKeysOptions {
  /** URL of the JSON Web Key Set. */
  url: string;
  /** Timeout of one fetch, in ms. */
  timeoutMs: number;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** A signing key, or why there is none (no secret in it). */
export type SigningKeyLookup = { ok: true; key: KeyObject } | { ok: false; reason: string };

/** The published signing keys, by key id. */
export class SigningKeys {
  private keys = new Map<string, KeyObject>();
  private loadedAt = Number.NEGATIVE_INFINITY;
  private triedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | undefined;
  private lastError = '';

  constructor(private readonly o: SigningKeysOptions) {}

  /** The RSA signing key with id `kid`. Never throws: a failed fetch leaves the keys fetched before. */
  async get(kid: string): Promise<SigningKeyLookup> {
    const now = (this.o.now ?? Date.now)();
    const due = now - this.loadedAt > KEEP_MS || !this.keys.has(kid);
    // A fetch under way is waited for, so the requests that arrive together at start all get its keys.
    if (this.loading) await this.loading;
    else if (due && now - this.triedAt > REFETCH_MS) await this.refresh(now);
    const key = this.keys.get(kid);
    if (key) return { ok: true, key };
    return { ok: false, reason: this.lastError || 'no published signing key has the token’s key id' };
  }

  private refresh(now: number): Promise<void> {
    this.triedAt = now;
    this.loading = this.load()
      .then(() => {
        this.lastError = '';
      })
      .catch((err: unknown) => {
        this.lastError = `signing keys could not be fetched: ${err instanceof Error ? err.message.slice(0, 200) : 'error'}`;
      })
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }

  private async load(): Promise<void> {
    // Read within a bound (a key set is a few KB), as any download: `res.json()` would read whatever the answer holds.
    const { data } = await fetchFile(this.o.url, {
      maxBytes: MAX_KEY_SET_BYTES,
      signal: AbortSignal.timeout(this.o.timeoutMs),
      label: 'the Bot Service key set',
      ...(this.o.fetch && { fetch: this.o.fetch }),
    });
    const set = keySetSchema.parse(JSON.parse(new TextDecoder().decode(data)));
    const keys = new Map<string, KeyObject>();
    for (const jwk of set.keys) {
      if (jwk.kty !== 'RSA' || jwk.kid === undefined || (jwk.use !== undefined && jwk.use !== 'sig')) continue;
      try {
        keys.set(jwk.kid, createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' }));
      } catch {
        // A key Node cannot read is not one any token verifies with.
      }
    }
    this.keys = keys;
    this.loadedAt = (this.o.now ?? Date.now)();
  }
}
