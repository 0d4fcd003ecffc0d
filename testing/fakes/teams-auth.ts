/**
 * The identity side of the fake Microsoft Teams platform: a test RSA key set
 * (the one the fake's JWKS publishes and a second, unpublished one for forged
 * tokens) and RS256 JWTs made with node:crypto, shaped like the tokens Azure
 * Bot Service puts in `Authorization: Bearer` of each activity it POSTs.
 */
import { createSign, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';

/** One signing key: its id (`kid`), private half, and public half as a JWK. */
export interface TeamsSigningKey {
  kid: string;
  privateKey: KeyObject;
  jwk: JsonWebKey;
}

/** Makes an RSA-2048 signing key with id `kid`. */
export function teamsSigningKey(kid: string): TeamsSigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' } };
}

const b64url = (v: string | Buffer): string => Buffer.from(v).toString('base64url');

/** An RS256 JWT of `claims` signed with `key` (its `kid` in the header). */
export function signJwt(claims: Record<string, unknown>, key: TeamsSigningKey): string {
  const head = `${b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: key.kid }))}.${b64url(JSON.stringify(claims))}`;
  const signature = createSign('RSA-SHA256').update(head).sign(key.privateKey);
  return `${head}.${b64url(signature)}`;
}

/** What to change in a test token (a good one by default). */
export interface TeamsTokenOptions {
  /** `aud`. Default: the app id. */
  audience?: string;
  /** `iss`. Default: the tenant's Entra v1 issuer, `https://sts.windows.net/<tenant>/`. */
  issuer?: string;
  /** Seconds from now to `exp` (negative: expired). Default 3600. */
  expiresInSeconds?: number;
  /** Sign with a key the fake does not publish (same `kid`): a forged token. Default false. */
  wrongKey?: boolean;
  /** The `serviceurl` claim. Default: the activity's serviceUrl when posted with `postActivity`, else none. */
  serviceUrl?: string;
}
