/**
 * Bot Connector and token failures → typed errors. The Agents SDK's
 * connector client throws `HttpError` (status, response headers and body)
 * for a non-2xx answer and whatever `fetch` throws for no answer; each
 * becomes a TeamsApiError, a ChannelApiError, so delivery retries a 429
 * after its `Retry-After` and a 5xx or network error with backoff, and gives
 * up on any other 4xx. Tokens and the client secret are removed from every
 * message.
 */
import { HttpError } from '@microsoft/agents-hosting';
import { ChannelApiError, redactSecrets } from 'steerbot/plugin';

/** A Bot Connector or token call failed. */
export class TeamsApiError extends ChannelApiError {}

/** A service URL outside the allowed hosts: nothing is sent there. */
export class TeamsServiceUrlError extends TeamsApiError {}

/** Seconds of a `Retry-After` header, in ms; undefined when absent or not a number of seconds. */
export function retryAfterMsOf(value: string | null | undefined): number | undefined {
  const seconds = value == null ? Number.NaN : Number(value);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** The error of a failed call with answer `status` (0: none). `defaultRetryMs`: the wait of a 429 that names none. */
export function teamsStatusError(message: string, status: number, retryAfter: string | null, defaultRetryMs: number, secrets: string[]): TeamsApiError {
  const text = redactSecrets(message.slice(0, 500), ...secrets);
  if (status === 429) return new TeamsApiError(text, { status, retryAfterMs: retryAfterMsOf(retryAfter) ?? defaultRetryMs });
  return new TeamsApiError(text, status > 0 ? { status } : {});
}

/** Converts what a connector call threw into a TeamsApiError. */
export function teamsError(what: string, err: unknown, defaultRetryMs: number, secrets: string[]): TeamsApiError {
  if (err instanceof TeamsApiError) return err;
  if (err instanceof HttpError) {
    const retryAfter = err.response?.headers?.get('retry-after') ?? null;
    return teamsStatusError(`teams ${what} failed: ${err.message}`, err.status, retryAfter, defaultRetryMs, secrets);
  }
  const reason = err instanceof Error ? err.message : String(err);
  return teamsStatusError(`teams ${what} failed: network error: ${reason}`, 0, null, defaultRetryMs, secrets);
}
