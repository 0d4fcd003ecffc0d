/**
 * The Microsoft Teams channel (an Azure Bot on the Microsoft 365 Agents
 * SDK, `@microsoft/agents-hosting`): the definition — id, settings,
 * variables, the keys it keeps. The channel itself (and with it the SDK) is
 * imported only when a Teams section is configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { teamsConfigSchema } from './config.js';
import { TEAMS_CONVERSATION_KEYS, TEAMS_PLUGIN_ID } from './keys.js';

/** The Teams channel (`channels.teams`), on when `TEAMS_APP_ID` is set. */
export default defineChannelPlugin({
  id: TEAMS_PLUGIN_ID,
  kind: 'channel',
  description: 'Microsoft Teams through an Azure Bot: activities with a checked Bot Service token in, Bot Connector replies out.',
  configSchema: teamsConfigSchema,
  storage: { conversationKeys: TEAMS_CONVERSATION_KEYS },
  redact: { headers: ['authorization'], paths: ['appPassword'] },
  env: [
    { env: 'TEAMS_APP_ID', path: 'appId', kind: 'string', enables: true },
    { env: 'TEAMS_APP_PASSWORD', path: 'appPassword', kind: 'string', secret: true },
    { env: 'TEAMS_TENANT_ID', path: 'tenantId', kind: 'string' },
    { env: 'TEAMS_WEBHOOK_PATH', path: 'webhookPath', kind: 'string' },
    { env: 'TEAMS_AUTHORITY_ENDPOINT', path: 'authorityEndpoint', kind: 'string' },
    { env: 'TEAMS_BOT_FRAMEWORK_KEYS_URL', path: 'botFrameworkKeysUrl', kind: 'string' },
    { env: 'TEAMS_SERVICE_URL', path: 'serviceUrl', kind: 'string' },
    { env: 'TEAMS_SERVICE_URL_HOSTS', path: 'serviceUrlHosts', kind: 'list' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createTeamsPlugin(config, deps),
});
