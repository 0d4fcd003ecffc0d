/**
 * The `steerbot` package: start a bot from a configuration, and the types of
 * that configuration.
 *
 * ```ts
 * import { loadConfig, startApp } from 'steerbot';
 * const app = await startApp({ config: await loadConfig({ file: 'steerbot.json' }) });
 * ```
 */

// The built-in plugins' settings, as `SteerbotConfig` types them (`typeof` a schema: a type, no run-time export).
export type { DiscordConfig, discordConfigSchema } from '../plugins/discord/config.js';
export type { EmailConfig, emailConfigSchema } from '../plugins/email/config.js';
export type { FeishuConfig, feishuConfigSchema } from '../plugins/feishu/config.js';
export type { LineConfig, lineConfigSchema } from '../plugins/line/config.js';
export type { LocalAgentSettings, localAgentConfigSchema } from '../plugins/local-agent/index.js';
export type { MatrixConfig, matrixConfigSchema } from '../plugins/matrix/config.js';
export type { SlackConfig, slackConfigSchema } from '../plugins/slack/config.js';
export type { TeamsConfig, teamsConfigSchema } from '../plugins/teams/config.js';
export type { TelegramConfig, telegramConfigSchema } from '../plugins/telegram/config.js';
export type { WebConfig, webConfigSchema } from '../plugins/web/config.js';
export type { WebhookChannelConfig, webhookChannelConfigSchema } from '../plugins/webhook/config.js';
export type { WhatsAppConfig, whatsappConfigSchema } from '../plugins/whatsapp/config.js';
export type { LoadConfigOptions } from '../src/config/load.js';
export type { CoreConfig, coreConfigSchema, HostPort } from '../src/config/schema.js';
export { type ApprovalRecord, type approvalRecordSchema, type DecideResult, decideApproval } from '../src/protocol/approvals.js';
export { type PurgeOptions, type PurgeResult, purgeConversation } from '../src/protocol/purge.js';
export type { AfterPurge, RetentionOptions } from '../src/protocol/retention.js';
export {
  type configSchema,
  defineConfig,
  loadConfig,
  readConfig,
  type SteerbotConfig,
  type SteerbotConfigInput,
} from './config.js';
export type { PluginRegistry } from './registry.js';
export { type SendMessageRequest, type SendMessageResult, sendMessage } from './send.js';
export { type RunningApp, type StartAppOptions, startApp } from './start.js';
export { redactConfig } from './summary.js';
