/**
 * The LINE channel (Messaging API, on `@line/bot-sdk`): the definition — id,
 * settings, variables, the keys it keeps. The channel itself (and with it
 * the SDK) is imported only when a LINE section is configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { lineConfigSchema } from './config.js';
import { LINE_CONVERSATION_KEYS, LINE_PLUGIN_ID } from './keys.js';

/** The LINE channel (`channels.line`), on when `LINE_CHANNEL_ACCESS_TOKEN` is set. */
export default defineChannelPlugin({
  id: LINE_PLUGIN_ID,
  kind: 'channel',
  description: 'LINE through the Messaging API: a signed webhook in, replies (reply token, else push) out.',
  configSchema: lineConfigSchema,
  storage: { conversationKeys: LINE_CONVERSATION_KEYS },
  redact: { headers: ['x-line-signature'], paths: ['channelAccessToken', 'channelSecret'] },
  env: [
    { env: 'LINE_CHANNEL_ACCESS_TOKEN', path: 'channelAccessToken', kind: 'string', secret: true, enables: true },
    { env: 'LINE_CHANNEL_SECRET', path: 'channelSecret', kind: 'string', secret: true },
    { env: 'LINE_WEBHOOK_PATH', path: 'webhookPath', kind: 'string' },
    { env: 'LINE_API_BASE_URL', path: 'apiBaseURL', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createLinePlugin(config, deps),
});
