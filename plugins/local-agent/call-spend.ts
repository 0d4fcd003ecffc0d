/**
 * What a model call that ended without an answer costs. A provider reports
 * usage only with a whole answer; a call cut off by a stop (or a shutdown, or
 * a lost lease), gone silent or failed reports none, though the provider
 * bills the prompt once it has the request, and the words it said. One rule
 * for all of them: the prompt's estimate for every request that may have
 * reached the provider (`requestsReached`, the runtime's rule, which the
 * summarizer's calls are charged by too), and the estimate of what was said.
 */
import type { ModelMessage } from 'ai';
import { compaction, type StepRecord } from 'steerbot/runner';
import type { LoopState } from './loop-state.js';

/** The estimated usage of a call that recorded no answer. */
export type CallSpend = NonNullable<StepRecord['usage']>;

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
