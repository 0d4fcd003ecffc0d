/**
 * Memory types of the runner contract (`memory` in `steerbot/runner`): what
 * `RunContext.features.memory` saves and finds. One namespace: only a plugin that
 * offers memory tools needs them.
 */

export type { MemoryHit, MemoryNote, MemorySaveResult } from '../src/people/memory.js';
