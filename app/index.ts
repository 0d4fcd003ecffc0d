/**
 * The `steerbot` package: start a bot from a configuration, and the types of
 * that configuration.
 *
 * ```ts
 * import { loadConfig, startApp } from 'steerbot';
 * const app = await startApp({ config: await loadConfig({ file: 'steerbot.json' }) });
 * ```
 */
export { buildConfigSchema, defineConfig, envBindings, loadConfig, readConfig, DEFAULT_CONFIG, type SteerbotConfig, type SteerbotConfigInput } from './config.js';
export { BUILTIN_PLUGINS, createRegistry, loadPluginModule, resolvePlugins, type AnyDefinition, type PluginRegistry } from './registry.js';
export { startApp, type RunningApp, type StartAppOptions } from './start.js';
export { redactConfig } from './summary.js';
export { ConfigError, type ConfigIssue } from '../src/errors.js';
export type { AgentTool, ToolCallContext } from '../plugins/local-agent/tools.js';
export { ToolFailure, type ToolFailureCategory } from '../plugins/local-agent/tool-errors.js';
export { decideApproval, type DecideResult } from '../src/protocol/approvals.js';
export type { EnvBinding, LoadConfigOptions } from '../src/config.js';
export type { PluginEnvBinding } from '../src/plugin-definition.js';
export { purgeConversation, type PurgeOptions, type PurgeResult } from '../src/protocol/purge.js';
export type { AfterPurge, RetentionOptions } from '../src/protocol/retention.js';
