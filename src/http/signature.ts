/**
 * Request signing shared by everything steerbot signs or checks over HTTP
 * (the webhook channel's requests and callbacks, the http-agent runner's
 * requests to an external agent): `X-Steerbot-Signature:
 * sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>` with the unix
 * time in seconds in `X-Steerbot-Timestamp`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header carrying the unix time (seconds) the request was signed at. */
export const TIMESTAMP_HEADER = 'x-steerbot-timestamp';
/** Header carrying `sha256=<hex>`. */
export const SIGNATURE_HEADER = 'x-steerbot-signature';

/** The raw HMAC-SHA256(secret, "<timestamp>.<body>"): what is signed, in one place. */
function mac(secret: string, timestamp: number | string, body: string | Buffer): Buffer {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest();
}

/** `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`. */
export function sign(secret: string, timestamp: number | string, body: string | Buffer): string {
  return `sha256=${mac(secret, timestamp, body).toString('hex')}`;
}

/** Headers of a signed request of `body` at `nowSeconds`. */
export function signedHeaders(secret: string, body: string | Buffer, nowSeconds = Math.floor(Date.now() / 1000)): Record<string, string> {
  return { [TIMESTAMP_HEADER]: String(nowSeconds), [SIGNATURE_HEADER]: sign(secret, nowSeconds, body) };
}

const SIGNATURE_RE = /^sha256=[0-9a-fA-F]{64}$/;

/** Why a request's signature was refused, or undefined when it is good. */
export function checkSignature(
  secret: string,
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  nowSeconds: number,
  maxSkewSeconds: number,
): string | undefined {
  const ts = headers[TIMESTAMP_HEADER];
  const sig = headers[SIGNATURE_HEADER];
  if (typeof sig !== 'string' || sig === '') return `missing ${SIGNATURE_HEADER} header`;
  if (typeof ts !== 'string' || ts === '') return `missing ${TIMESTAMP_HEADER} header`;
  if (!/^\d{1,12}$/.test(ts)) return `${TIMESTAMP_HEADER} must be unix seconds`;
  if (!SIGNATURE_RE.test(sig)) return `${SIGNATURE_HEADER} must be sha256=<64 hex digits>`;
  // Compared as 32 raw bytes (hex case does not matter); every request pays this, so no hex strings are built.
  if (!timingSafeEqual(mac(secret, ts, body), Buffer.from(sig.slice(7), 'hex'))) return 'bad signature';
  if (Math.abs(nowSeconds - Number(ts)) > maxSkewSeconds) return `stale timestamp: more than ${maxSkewSeconds} s from the server clock`;
  return undefined;
}
