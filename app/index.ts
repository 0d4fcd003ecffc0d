/**
 * The `steerbot` package: start a bot from a configuration, and the types of
 * that configuration.
 *
 * ```ts
 * import { loadConfig, startApp } from 'steerbot';
 * const app = await startApp({ config: await loadConfig({ file: 'steerbot.json' }) });
 * ```
 */

export type { RunnerPluginDefinition } from '../runner/index.js';
export type { ChannelPluginDefinition } from '../src/channel.js';
export type { EnvBinding, EnvKind, LoadConfigOptions } from '../src/config.js';
export type { CoreConfig, coreConfigSchema, HostPort } from '../src/config-schema.js';
export { ConfigError, type ConfigIssue, SteerbotError, type SteerbotErrorCode } from '../src/errors.js';
export type { PluginEnvBinding } from '../src/plugin-definition.js';
export { type DecideResult, decideApproval } from '../src/protocol/approvals.js';
export { type PurgeOptions, type PurgeResult, purgeConversation } from '../src/protocol/purge.js';
export type { AfterPurge, RetentionOptions } from '../src/protocol/retention.js';
export type { RedisClient } from '../src/redis.js';
export {
  buildConfigSchema,
  DEFAULT_CONFIG,
  defineConfig,
  envBindings,
  loadConfig,
  readConfig,
  type SteerbotConfig,
  type SteerbotConfigInput,
} from './config.js';
export type { PluginRegistry } from './registry.js';
export { type RunningApp, type StartAppOptions, startApp } from './start.js';
export { redactConfig } from './summary.js';
