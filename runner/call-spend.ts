/**
 * Which requests of a model call that ended without an answer the provider
 * may bill. A provider reports usage only with a whole answer, but bills the
 * prompt of every request it got; a request that provably never reached it
 * is billed nothing: the connection was never made, the request was never
 * built, or the provider refused it with an error status (providers bill no
 * request they refuse). The one rule for the agent's calls (a runner plugin's
 * `RunRecord.spent`) and the summarizer's (runner/compaction/summarize.ts).
 */
import { APICallError, InvalidArgumentError, InvalidPromptError, LoadAPIKeyError, RetryError, UnsupportedFunctionalityError } from 'ai';

// The connection was never made: nothing of the request reached anyone.
const NOT_CONNECTED: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * How many requests of a failed model call (`error`: what the AI SDK threw)
 * may have reached the provider: each try of the provider's own retries
 * (`RetryError`) counts unless it provably never did.
 */
export function requestsReached(error: unknown): number {
  if (RetryError.isInstance(error)) return error.errors.filter((e) => !neverReached(e)).length;
  return neverReached(error) ? 0 : 1;
}

/** True when `error` proves its request was never billed: not built, not sent, or refused with an error status. */
function neverReached(error: unknown): boolean {
  if (APICallError.isInstance(error) && error.statusCode !== undefined && error.statusCode >= 400) return true;
  if (
    InvalidPromptError.isInstance(error) ||
    InvalidArgumentError.isInstance(error) ||
    UnsupportedFunctionalityError.isInstance(error) ||
    LoadAPIKeyError.isInstance(error)
  )
    return true;
  // The network error under the provider's fetch error (a few causes deep at most).
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e instanceof Error; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NOT_CONNECTED.has(code)) return true;
    e = e.cause;
  }
  return false;
}
