/**
 * The `steerbot` package: start a bot from a configuration, and the types of
 * that configuration.
 *
 * ```ts
 * import { loadConfig, startApp } from 'steerbot';
 * const app = await startApp({ config: await loadConfig({ file: 'steerbot.json' }) });
 * ```
 */

export type { PurgeRequest } from '../host/purge.js';
export type { LoadConfigOptions } from '../src/config/load.js';
export type { CoreConfig, coreConfigSchema, HostPort } from '../src/config/schema.js';
export { type ApprovalRecord, type approvalRecordSchema, type DecideResult, decideApproval } from '../src/protocol/approvals.js';
export type { PurgeResult } from '../src/protocol/purge.js';
export type { AfterPurge, RetentionOptions } from '../src/protocol/retention.js';
export {
  type configSchema,
  defineConfig,
  loadConfig,
  readConfig,
  type SteerbotConfig,
  type SteerbotConfigInput,
} from './config.js';
// The built-in plugins' settings, as `SteerbotConfig` types them: `plugins.TelegramConfig`, … (types only).
export type * as plugins from './plugin-configs.js';
export type { PluginRegistry } from './registry.js';
export { type SendMessageRequest, type SendMessageResult, sendMessage } from './send.js';
export { type RunningApp, type StartAppOptions, startApp } from './start.js';
export { redactConfig } from './summary.js';
