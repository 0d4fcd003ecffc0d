/**
 * The runner plugin contract (`steerbot/runner`): what a runner plugin module
 * exports (`defineRunnerPlugin`), what it gets for each run (`RunContext`),
 * and the helpers a plugin author needs (the model factory).
 */

// The zod steerbot composes the configuration with, so a plugin's configSchema needs no zod of its own.
export { z } from 'zod';
export type { PluginRedaction } from '../src/logger.js';
export type { PluginEnvBinding } from '../src/plugin-definition.js';
export {
  assertPluginKeyName,
  type CoreConversationKeys,
  PluginStorage,
  type PluginStorageDeclaration,
  pluginStorage,
} from '../src/plugin-storage.js';
export type { SteeringMode, StopKind } from '../src/protocol/types.js';
export type { MessageReceived, SeqEntry } from '../src/record/entries.js';
export type { RedisClient } from '../src/redis.js';
export { type LeaseState, RedisLease } from '../src/redis-lease.js';
export type { ScriptReply } from '../src/scripts/index.js';
export { defineScript, type PluginScript } from '../src/scripts/plugin-script.js';
export { type PluginMetrics, pluginMetrics } from '../src/telemetry/plugin-metrics.js';
export { createModel } from './model.js';
export {
  type ApprovalGate,
  type ApprovalOutcome,
  type ApprovalRequest,
  type ArtifactRef,
  type ArtifactStore,
  type CompactionHooks,
  type DeliverySink,
  defineRunnerPlugin,
  type ModelSettings,
  type RunContext,
  type RunnerCapabilities,
  type RunnerManifest,
  type RunnerPlugin,
  type RunnerPluginDefinition,
  type RunnerPluginDeps,
  type RunResult,
  type StepRecord,
  type ToolCallClaim,
  type ToolCallJournal,
  type ToolCallRef,
} from './plugin.js';
