/**
 * What a model call that ended without an answer costs. A provider reports
 * usage only with a whole answer; a call cut off by a stop (or a shutdown, or
 * a lost lease), gone silent or failed reports none, though the provider
 * bills the prompt once it has the request, and the words it said. One rule
 * for all of them: the prompt's estimate for every request that may have
 * reached the provider, and the estimate of what was said. A request that
 * provably never reached it is charged nothing: the connection was never
 * made, the request was never built, or the provider refused it with an
 * error status (providers bill no request they refuse).
 */
import { APICallError, InvalidArgumentError, InvalidPromptError, LoadAPIKeyError, type ModelMessage, RetryError, UnsupportedFunctionalityError } from 'ai';
import { compaction, type StepRecord } from 'steerbot/runner';
import type { LoopState } from './loop-state.js';

/** The estimated usage of a call that recorded no answer. */
export type CallSpend = NonNullable<StepRecord['usage']>;

// The connection was never made: nothing of the request reached anyone.
const NOT_CONNECTED: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * The spend of a call that ended without an answer: `requests` (how many of
 * its requests may have reached the provider) times the estimate of `sent`
 * (with the state's system prompt and tools), and the estimate of `text`,
 * what it said. Undefined when nothing can have been billed.
 */
export function unansweredSpend(state: LoopState, sent: ModelMessage[], text: string, requests: number): CallSpend | undefined {
  if (requests === 0 && text === '') return undefined;
  return { inputTokens: requests * (compaction.estimateMessages(sent) + state.overhead), outputTokens: compaction.estimateTokens(text) };
}

/**
 * How many of a failed call's requests may have reached the provider: each
 * try of the provider's own retries (`RetryError`) counts unless it provably
 * never did (`neverReached`).
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
