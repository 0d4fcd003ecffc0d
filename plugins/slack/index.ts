/**
 * The Slack channel's definition: id, settings and variables. The channel
 * itself (`channel.ts`, with `@slack/web-api` and `@slack/socket-mode`) is
 * imported when a Slack section is configured, so a bot without Slack never
 * loads the Slack clients.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { slackConfigSchema } from './config.js';
import { THREAD_KEY } from './conversation.js';

/** The Slack channel (`channels.slack`), on when `SLACK_BOT_TOKEN` is set. */
export default defineChannelPlugin({
  id: 'slack',
  kind: 'channel',
  description: 'Slack apps through the Web API: Socket Mode or the Events API; threads are conversations.',
  configSchema: slackConfigSchema,
  redact: { headers: ['x-slack-signature'], paths: ['botToken', 'appToken', 'signingSecret'] },
  storage: { conversationKeys: [THREAD_KEY] },
  env: [
    { env: 'SLACK_BOT_TOKEN', path: 'botToken', kind: 'string', secret: true, enables: true },
    { env: 'SLACK_APP_TOKEN', path: 'appToken', kind: 'string', secret: true },
    { env: 'SLACK_SIGNING_SECRET', path: 'signingSecret', kind: 'string', secret: true },
    { env: 'SLACK_MODE', path: 'mode', kind: 'string' },
    { env: 'SLACK_API_URL', path: 'apiUrl', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createSlackPlugin(config, deps),
});
