/**
 * Slack's request signatures (v0): `X-Slack-Signature` is
 * `v0=` + hex HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>` with
 * the app's Signing Secret. Checked on the raw bytes, in constant time,
 * before the body is parsed; a timestamp outside the skew is a replay.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { RouteRequest } from 'steerbot/plugin';

/** Header of the signature. */
export const SLACK_SIGNATURE_HEADER = 'x-slack-signature';
/** Header of the request time, in Unix seconds. */
export const SLACK_TIMESTAMP_HEADER = 'x-slack-request-timestamp';

/** The `v0=…` signature of `body` sent at `timestampSeconds`. */
export function slackSignature(secret: string, timestampSeconds: number | string, body: Buffer | string): string {
  const mac = createHmac('sha256', secret);
  mac.update(`v0:${timestampSeconds}:`);
  mac.update(body);
  return `v0=${mac.digest('hex')}`;
}

/** Why a request's signature was refused, or undefined when it checks out. */
export function signatureProblem(
  headers: RouteRequest['headers'],
  body: Buffer,
  opts: { secret: string; maxSkewSeconds: number; nowMs?: number },
): string | undefined {
  const ts = headers[SLACK_TIMESTAMP_HEADER];
  const sig = headers[SLACK_SIGNATURE_HEADER];
  if (typeof ts !== 'string' || !/^\d{1,12}$/.test(ts)) return 'missing or malformed X-Slack-Request-Timestamp';
  if (typeof sig !== 'string' || sig.length === 0) return 'missing X-Slack-Signature';
  const now = (opts.nowMs ?? Date.now()) / 1000;
  if (Math.abs(now - Number(ts)) > opts.maxSkewSeconds) return 'X-Slack-Request-Timestamp is too far from now (a replay?)';
  const expected = Buffer.from(slackSignature(opts.secret, ts, body));
  const given = Buffer.from(sig);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'bad X-Slack-Signature';
  return undefined;
}
