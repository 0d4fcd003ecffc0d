/**
 * Graph API failures → typed errors. Every one is a ChannelApiError (so
 * delivery retries a rate limit after `retryAfterMs` and a 5xx with backoff,
 * and gives up on anything else), carrying the Graph error `graphCode`; the
 * access token is removed from every message.
 */
import { ChannelApiError, redactSecrets, retryAfterMs } from 'steerbot/plugin';

/** Graph error code of a reply refused because the 24-hour customer-service window is closed ("re-engagement message"). */
export const WINDOW_CLOSED_CODE = 131047;

/** Graph error codes of rate limits (the API answers most of them with HTTP 400, not 429). */
const RATE_LIMIT_CODES = new Set([4, 80007, 130429, 131048, 131056]);

/** A Graph API call failed. */
export class WhatsAppApiError extends ChannelApiError {
  /** The Graph error `code`, when the API answered with one. */
  readonly graphCode: number | undefined;
  constructor(message: string, opts: { status?: number; retryAfterMs?: number; graphCode?: number; cause?: unknown } = {}) {
    super(message, opts);
    this.graphCode = opts.graphCode;
  }
}

/**
 * WhatsApp refused a reply because the user wrote last more than 24 hours ago:
 * only a template message may reach them now. Not retried (a retry cannot
 * succeed); recorded for the console.
 */
export class WindowClosedError extends WhatsAppApiError {
  constructor(message: string) {
    super(message, { status: 400, graphCode: WINDOW_CLOSED_CODE });
  }
}

/** The Graph error body: `{ error: { message, code, error_subcode, error_data: { details } } }`. */
interface GraphErrorBody {
  error?: { message?: unknown; code?: unknown; error_data?: { details?: unknown } };
}

/** Builds the error of a non-2xx Graph answer. `defaultRetryMs`: the wait of a rate limit that names none. */
export function graphError(what: string, status: number, body: unknown, retryAfter: string | null, token: string, defaultRetryMs: number): WhatsAppApiError {
  const err = (body as GraphErrorBody | undefined)?.error;
  const code = typeof err?.code === 'number' ? err.code : undefined;
  const details = typeof err?.error_data?.details === 'string' ? `: ${err.error_data.details}` : '';
  const text = typeof err?.message === 'string' ? err.message : 'no error message';
  const message = redactSecrets(`whatsapp ${what} failed: ${status}${code !== undefined ? ` (code ${code})` : ''} ${text}${details}`.slice(0, 500), token);
  if (code === WINDOW_CLOSED_CODE) return new WindowClosedError(message);
  if (status === 429 || (code !== undefined && RATE_LIMIT_CODES.has(code))) {
    return new WhatsAppApiError(message, {
      status: 429,
      retryAfterMs: retryAfterMs(retryAfter) ?? defaultRetryMs,
      ...(code !== undefined && { graphCode: code }),
    });
  }
  return new WhatsAppApiError(message, { status, ...(code !== undefined && { graphCode: code }) });
}

/** A call that got no answer (connection refused, timeout). */
export function networkError(what: string, err: unknown, token: string): WhatsAppApiError {
  const reason = err instanceof Error ? err.message : String(err);
  return new WhatsAppApiError(redactSecrets(`whatsapp ${what} failed: network error: ${reason}`, token));
}
