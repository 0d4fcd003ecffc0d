/**
 * The Web API client (`@slack/web-api`, Slack's official client) and its
 * errors as ChannelApiError. The client never retries by itself and rejects
 * rate-limited calls: delivery owns retries and waits out `Retry-After`
 * (`retryAfterMs`) for the whole channel, which the client's own queue
 * would hide.
 */
import { ErrorCode, LogLevel, type Logger as SlackLogger, WebClient, type WebClientOptions } from '@slack/web-api';
import { ChannelApiError, type Logger, redactSecrets } from 'steerbot/plugin';

/**
 * Options both clients (Web API and Socket Mode) are built with: our base
 * URL, no retries of their own, rate limits thrown.
 */
export function webClientOptions(apiUrl: string, logger: Logger, fetchFn?: typeof fetch): WebClientOptions {
  return {
    slackApiUrl: apiUrl,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: 15_000,
    logger: slackLogger(logger),
    ...(fetchFn && { fetch: fetchFn }),
  };
}

/** Creates the bot's Web API client. */
export function createWebClient(token: string, apiUrl: string, logger: Logger, fetchFn?: typeof fetch): WebClient {
  return new WebClient(token, webClientOptions(apiUrl, logger, fetchFn));
}

/**
 * `@slack/logger`'s interface over pino. Debug lines are dropped: the Slack
 * clients log whole payloads (user text) at debug.
 */
export function slackLogger(logger: Logger): SlackLogger {
  return {
    debug: () => {},
    info: (...msg: unknown[]) => logger.debug({ slack: 'client' }, msg.map(String).join(' ')),
    warn: (...msg: unknown[]) => logger.warn({ slack: 'client' }, msg.map(String).join(' ')),
    error: (...msg: unknown[]) => logger.error({ slack: 'client' }, msg.map(String).join(' ')),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  };
}

interface SlackErrorLike {
  code?: unknown;
  retryAfter?: unknown;
  statusCode?: unknown;
  data?: { error?: unknown };
  original?: unknown;
  message?: unknown;
}

/** Converts an error of a Web API call to a ChannelApiError that is safe to log: 429 carries `retryAfterMs`. */
export function toChannelApiError(err: unknown, method: string, ...secrets: string[]): ChannelApiError {
  if (err instanceof ChannelApiError) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as SlackErrorLike;
  const text = (s: string) => redactSecrets(`slack ${method} failed: ${s}`, ...secrets);
  switch (e.code) {
    case ErrorCode.RateLimitedError: {
      const seconds = typeof e.retryAfter === 'number' && Number.isFinite(e.retryAfter) ? e.retryAfter : 1;
      return new ChannelApiError(text(`rate limited, retry after ${seconds} s`), { status: 429, retryAfterMs: Math.max(0, seconds) * 1000 });
    }
    case ErrorCode.PlatformError:
      return new ChannelApiError(text(String(e.data?.error ?? 'error')), { status: 400 });
    case ErrorCode.HTTPError:
      return new ChannelApiError(text(`HTTP ${String(e.statusCode)}`), { ...(typeof e.statusCode === 'number' && { status: e.statusCode }) });
    default: {
      const inner = e.original instanceof Error ? e.original.message : typeof e.message === 'string' ? e.message : String(err);
      return new ChannelApiError(text(`network error: ${inner}`));
    }
  }
}

/** The platform error code of a failed call (`channel_not_found`, `message_not_found`, …), if it was one. */
export function platformError(err: unknown): string | undefined {
  const e = (typeof err === 'object' && err !== null ? err : {}) as SlackErrorLike;
  return e.code === ErrorCode.PlatformError && typeof e.data?.error === 'string' ? e.data.error : undefined;
}

/** Runs one Web API call; a failure becomes a ChannelApiError (tokens redacted). */
export async function call<T>(method: string, fn: () => Promise<T>, ...secrets: string[]): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toChannelApiError(err, method, ...secrets);
  }
}
