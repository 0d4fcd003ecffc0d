/**
 * Open platform failures → typed errors. A failed call answers a non-2xx
 * status (or 200 with a non-zero `code`) and `{ code, msg }`; a rate limit
 * is HTTP 429, or the codes 99991400 (app frequency) and 230020 (a chat's
 * message frequency), with the wait in `x-ogw-ratelimit-reset` (seconds).
 * Each becomes a FeishuApiError, a ChannelApiError, so delivery retries a
 * rate limit after `retryAfterMs` and a 5xx or network error with backoff,
 * and gives up on any other 4xx. The app secret and the tenant access
 * token never reach a message: requests are named by their path only.
 */
import { ChannelApiError, redactSecrets } from 'steerbot/plugin';

/** Codes that mean "too many requests" whatever the HTTP status. */
const RATE_LIMIT_CODES = new Set([99991400, 230020]);

/** An open platform call failed. `platformCode`: the platform's error code, when it named one. */
export class FeishuApiError extends ChannelApiError {
  readonly platformCode: number | undefined;
  constructor(message: string, opts: { status?: number; retryAfterMs?: number; platformCode?: number; cause?: unknown } = {}) {
    super(message, opts);
    this.platformCode = opts.platformCode;
  }
}

/** Seconds of a header, in ms; undefined when absent or not a number. */
function secondsHeader(value: string | null): number | undefined {
  const seconds = value == null ? Number.NaN : Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** The error of an answer with `status` and body `body`. `defaultRetryMs`: the wait of a rate limit that names none. */
export function feishuError(what: string, status: number, body: unknown, headers: Headers, secrets: string[], defaultRetryMs: number): FeishuApiError {
  const b = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const code = typeof b.code === 'number' ? b.code : undefined;
  const msg = typeof b.msg === 'string' ? b.msg : '';
  const message = redactSecrets(`feishu ${what} failed: ${status} ${code ?? ''} ${msg}`.replace(/\s+/g, ' ').trim().slice(0, 500), ...secrets);
  const limited = status === 429 || (code !== undefined && RATE_LIMIT_CODES.has(code));
  if (limited) {
    const wait = secondsHeader(headers.get('x-ogw-ratelimit-reset')) ?? secondsHeader(headers.get('retry-after')) ?? defaultRetryMs;
    return new FeishuApiError(message, { status: 429, retryAfterMs: wait, ...(code !== undefined && { platformCode: code }) });
  }
  // A 200 with an error code is a refusal of the request: a 400 for delivery.
  return new FeishuApiError(message, { status: status >= 200 && status < 300 ? 400 : status, ...(code !== undefined && { platformCode: code }) });
}

/** The error of a call that got no answer (refused connection, timeout). */
export function networkError(what: string, err: unknown, secrets: string[]): FeishuApiError {
  const reason = err instanceof Error ? err.message : String(err);
  return new FeishuApiError(redactSecrets(`feishu ${what} failed: network error: ${reason}`, ...secrets));
}
