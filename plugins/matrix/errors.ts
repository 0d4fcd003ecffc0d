/**
 * Client-server API failures → typed errors. A non-2xx answer carries
 * `{ errcode, error }`; a 429 (`M_LIMIT_EXCEEDED`) names its wait in
 * `retry_after_ms` (older servers) or `Retry-After` (seconds, newer ones).
 * Each becomes a MatrixApiError, a ChannelApiError, so delivery retries a
 * 429 after `retryAfterMs` and a 5xx or network error with backoff, and
 * gives up on any other 4xx. The access token is removed from every message.
 */
import { ChannelApiError, redactSecrets, retryAfterMs } from 'steerbot/plugin';

/** A client-server API call failed. `errcode`: Matrix's code (`M_FORBIDDEN`, …) when it named one. */
export class MatrixApiError extends ChannelApiError {
  readonly errcode: string | undefined;
  constructor(message: string, opts: { status?: number; retryAfterMs?: number; errcode?: string; cause?: unknown } = {}) {
    super(message, opts);
    this.errcode = opts.errcode;
  }
}

/** The wait a 429 names, in ms: `retry_after_ms` in the body, else `Retry-After` seconds; undefined when neither. */
function retryAfterOf(body: Record<string, unknown>, header: string | null): number | undefined {
  const ms = body.retry_after_ms;
  if (typeof ms === 'number' && Number.isFinite(ms) && ms >= 0) return ms;
  return retryAfterMs(header);
}

/** The error of a non-2xx answer. `defaultRetryMs`: the wait of a 429 that names none. */
export function matrixError(what: string, status: number, body: unknown, retryAfter: string | null, token: string, defaultRetryMs: number): MatrixApiError {
  const b = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const errcode = typeof b.errcode === 'string' ? b.errcode.slice(0, 64) : undefined;
  const text = typeof b.error === 'string' ? b.error : '';
  const message = redactSecrets(`matrix ${what} failed: ${status} ${errcode ?? ''} ${text}`.trim().slice(0, 500), token);
  const opts = { status, ...(errcode && { errcode }) };
  if (status === 429) return new MatrixApiError(message, { ...opts, retryAfterMs: retryAfterOf(b, retryAfter) ?? defaultRetryMs });
  return new MatrixApiError(message, opts);
}

/** The error of a call that got no answer (refused connection, timeout). */
export function networkError(what: string, err: unknown, token: string): MatrixApiError {
  const reason = err instanceof Error ? err.message : String(err);
  return new MatrixApiError(redactSecrets(`matrix ${what} failed: network error: ${reason}`, token));
}
