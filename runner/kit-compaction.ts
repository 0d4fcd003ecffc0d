/**
 * The compaction kit of the runner contract (`compaction` in
 * `steerbot/runner`): token estimates, recognising a provider's
 * context-overflow error, and the header a checkpoint's summary starts with.
 * One namespace: only a plugin that keeps its own prompt within the model's
 * window needs them, and it needs them together.
 */

export { SUMMARY_HEADER } from './compaction/checkpoint.js';
export { ESTIMATE_MAX_OVERCOUNT, estimateMessages, estimateTokens } from './compaction/estimate.js';
export { isContextOverflowError } from './compaction/overflow.js';
