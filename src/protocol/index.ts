/** The dispatch protocol's public surface. */
export { Dispatch } from './dispatch.js';
export type { ProtocolOptions, RateLimitOptions } from './options.js';
export { type RunRef, Runs } from './runs.js';
export { assertStateKey, ConversationState } from './state.js';
export * from './types.js';
