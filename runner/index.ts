/**
 * The runner plugin contract (`steerbot/runner`): what a runner plugin module
 * exports (`defineRunnerPlugin`), what it gets for each run (`RunContext`),
 * the local agent's tool types, and the helpers a plugin author needs (the
 * model factory, the projection of the record into model messages, trace
 * spans; token estimates and the summary's header in the `compaction`
 * namespace, schedule types in `schedules`, memory types in `memory`, the
 * framing of user-derived text in `untrusted`).
 * docs/plugins.md, "The public API", lists them.
 */

export { DEFAULT_SYSTEM_PROMPT, DEFAULTS, MODEL_PROVIDERS, type ModelProvider } from '../src/config/defaults.js';
/** Framing user-derived text for a prompt as data: `dataBlock`, `escapeData`, `escapeAttribute`, `oneLine`. */
export * as untrusted from '../src/data-block.js';
export { type AgentProfile, type BaseModelSettings, offersTool, type ProfileToolPolicy } from '../src/people/profiles.js';
export { activeContext, type CallUsage, type ModelCallTrace, traceModelCall, traceToolCall } from '../src/telemetry/agent-spans.js';
/** How many requests of a model call that failed may have reached (and be billed by) the provider. */
export { requestsReached } from './call-spend.js';
/** Token estimates, a context overflow recognised, the summary's header: `compaction.estimateTokens`, …. */
export * as compaction from './kit-compaction.js';
/** The types `RunContext.features.memory` saves and finds. */
export * as memory from './kit-memory.js';
/** The schedule types `RunContext.features.schedules` takes and lists, and `describeWhen`. */
export * as schedules from './kit-schedules.js';
export { createImageModel, createModel, createSpeechModel, createTranscriptionModel, modelSetupNotice } from './model.js';
export {
  type ApprovalGate,
  type ApprovalOutcome,
  type ApprovalRequest,
  type ArtifactRef,
  type ArtifactStore,
  type CompactionHooks,
  type ConversationSchedules,
  type DeliverySink,
  defineRunnerPlugin,
  type FileDelivery,
  type ModelSettings,
  type QuestionOutcome,
  type QuestionRequest,
  type RunAgent,
  type RunContext,
  type RunFeatures,
  type RunIdentities,
  type RunInfo,
  type RunMemory,
  type RunnerCapabilities,
  type RunnerManifest,
  type RunnerPlugin,
  type RunnerPluginDefinition,
  type RunnerPluginDeps,
  type RunRecord,
  type RunResult,
  type RunStop,
  type RunSubagents,
  type StepRecord,
  type SubagentResult,
  type ToolCallClaim,
  type ToolCallJournal,
  type ToolCallRef,
} from './plugin.js';
export { answerText, userMessage } from './projection.js';
export { type AgentTool, type ToolCallContext, ToolFailure, type ToolFailureCategory, type ToolMode } from './tools/agent-tool.js';
