/**
 * Compaction checkpoints: a run's prompt is the checkpoint's summary plus the
 * record after it (`loadPrompt`); at run start and at turn boundaries the
 * runtime compacts when the next request would cross the threshold
 * (`compactIfNeeded`), on a provider overflow error, or on `/compact`.
 * Selection (`selectTurns`) and summarizing (`summarize`) are pure; the
 * compactor is the thin store that writes the checkpoint with a CAS.
 */
export { CHECKPOINT_KEY, CHECKPOINT_SCHEMA_VERSION, SUMMARY_HEADER, checkpointSchema, summaryMessages, validateCheckpoint } from './checkpoint.js';
export type { Checkpoint, CheckpointContext, CheckpointRejection, CheckpointValidation } from './checkpoint.js';
export { loadPrompt, type LoadPromptOptions, type LoadedPrompt } from './load.js';
export { BINARY_PART_TOKENS, Calibrator, MESSAGE_OVERHEAD_TOKENS, estimateMessages, estimateRequest, estimateTokens } from './estimate.js';
export type { CalibratorOptions, RequestEstimate, RequestEstimateOptions } from './estimate.js';
export { DEFAULT_KEEP_RECENT_TURNS, selectTurns, turnBoundaries, type SelectOptions, type Selection } from './select.js';
export { DEFAULT_MAX_SUMMARY_CHARS, fallbackSummary, summarize, type SummarizeOptions, type SummaryResult } from './summarize.js';
export { BREAKER_KEY, BREAKER_LIMIT, DEFAULT_THRESHOLD, compact, readBreaker, shouldCompact } from './compactor.js';
export type { CompactOptions, CompactResult, CompactionTrigger, LoadedBase, ShouldCompactInput } from './compactor.js';
export type { BreakerState } from '../../src/record/breaker.js';
export { compactIfNeeded, type CompactIfNeededOptions, type PressureCheck } from './pressure.js';
export { isContextOverflowError } from './overflow.js';
