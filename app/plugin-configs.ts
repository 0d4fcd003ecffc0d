/** The built-in plugins' settings, as `SteerbotConfig` types them (`typeof` a schema: a type, no run-time export); `steerbot`'s `plugins` namespace. */
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
