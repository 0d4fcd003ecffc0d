/** The dispatch protocol's public surface. */
export { Dispatch, type CommandSource, type StopResult } from './dispatch.js';
export { Runs, type RunRef } from './runs.js';
export { ConversationState, assertStateKey, type StateExpectation } from './state.js';
export { newRunId } from './ids.js';
export type { ProtocolOptions, RateLimitOptions, TokenBucketOptions } from './options.js';
export * from './types.js';
