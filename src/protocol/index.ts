/** The dispatch protocol's public surface. */
export { Dispatch } from './dispatch.js';
export { Runs, type RunRef } from './runs.js';
export { ConversationState, assertStateKey } from './state.js';
export type { ProtocolOptions, RateLimitOptions } from './options.js';
export * from './types.js';
