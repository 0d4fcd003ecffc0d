/**
 * Messaging API failures → typed errors. The SDK throws `HTTPFetchError`
 * (status, headers, body) for a non-2xx answer and whatever `fetch` throws
 * for no answer; each becomes a LineApiError, a ChannelApiError, so delivery
 * retries a 429 after `retryAfterMs` and a 5xx or network error with backoff,
 * and gives up on any other 4xx. The access token is removed from every message.
 */
import { HTTPFetchError } from '@line/bot-sdk';
import { ChannelApiError, redactSecrets, retryAfterMs } from 'steerbot/plugin';

/** A Messaging API call failed. */
export class LineApiError extends ChannelApiError {}

/** The `message` of LINE's error body (`{ message, details: [{ message, property }] }`), short. */
function lineMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { message?: unknown; details?: Array<{ message?: unknown; property?: unknown }> };
    const detail = parsed.details?.[0];
    const extra = detail && typeof detail.message === 'string' ? ` (${String(detail.property ?? '')}: ${detail.message})` : '';
    return typeof parsed.message === 'string' ? `${parsed.message}${extra}` : body;
  } catch {
    return body;
  }
}

/** Converts what a SDK call threw into a LineApiError. `defaultRetryMs`: the wait of a 429 that names none. */
export function lineError(what: string, err: unknown, token: string, defaultRetryMs: number): LineApiError {
  if (err instanceof HTTPFetchError) {
    const message = redactSecrets(`line ${what} failed: ${err.status} ${lineMessage(err.body)}`.slice(0, 500), token);
    if (err.status === 429) {
      return new LineApiError(message, { status: 429, retryAfterMs: retryAfterMs(err.headers.get('retry-after')) ?? defaultRetryMs, cause: err });
    }
    return new LineApiError(message, { status: err.status });
  }
  const reason = err instanceof Error ? err.message : String(err);
  return new LineApiError(redactSecrets(`line ${what} failed: network error: ${reason}`, token));
}
