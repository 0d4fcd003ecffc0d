/**
 * grammY errors → ChannelApiError, with the bot token removed. grammY's own
 * messages leave the token out, but the network error it wraps names the
 * request URL (`…/bot<token>/sendMessage`), so nothing from it is kept raw.
 */
import { GrammyError, HttpError } from 'grammy';
import { ChannelApiError, redactSecrets } from 'steerbot/plugin';

/** True when Telegram refused the call with this description (Telegram has no error codes finer than HTTP status). */
export function isTelegramError(err: unknown, status: number, description: RegExp): boolean {
  return err instanceof GrammyError && err.error_code === status && description.test(err.description);
}

/** True for the errors grammY throws for an API call. */
export function isApiCallError(err: unknown): err is GrammyError | HttpError {
  return err instanceof GrammyError || err instanceof HttpError;
}

/** Converts any error of an API call to a ChannelApiError that is safe to log: 429 carries `retryAfterMs`. */
export function toChannelApiError(err: unknown, method: string, token: string): ChannelApiError {
  if (err instanceof ChannelApiError) return err;
  if (err instanceof GrammyError) {
    method = err.method;
    const retryAfter = err.parameters.retry_after;
    return new ChannelApiError(redactSecrets(`telegram ${method} failed: ${err.error_code} ${err.description}`, token), {
      status: err.error_code,
      ...(typeof retryAfter === 'number' && { retryAfterMs: retryAfter * 1000 }),
    });
  }
  const inner = err instanceof HttpError ? err.error : err;
  const reason = inner instanceof Error ? inner.message : String(inner);
  return new ChannelApiError(redactSecrets(`telegram ${method} failed: network error: ${reason}`, token));
}
