/**
 * The Feishu / Lark channel (a custom app's bot, on `@larksuiteoapi/node-sdk`):
 * the definition — id, settings, variables, the key it keeps. The channel
 * itself (and with it the SDK) is imported only when a Feishu section is
 * configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { feishuConfigSchema } from './config.js';
import { FEISHU_CONVERSATION_KEYS, FEISHU_PLUGIN_ID } from './keys.js';

/** The Feishu / Lark channel (`channels.feishu`), on when `FEISHU_APP_ID` is set. */
export default defineChannelPlugin({
  id: FEISHU_PLUGIN_ID,
  kind: 'channel',
  description: 'Feishu / Lark through a custom app: the long connection or signed, encrypted callbacks in, IM messages, cards, images, files and voice out.',
  configSchema: feishuConfigSchema,
  storage: { conversationKeys: FEISHU_CONVERSATION_KEYS },
  redact: { headers: ['x-lark-signature'], paths: ['appSecret', 'encryptKey', 'verificationToken'] },
  env: [
    { env: 'FEISHU_APP_ID', path: 'appId', kind: 'string', enables: true },
    { env: 'FEISHU_APP_SECRET', path: 'appSecret', kind: 'string', secret: true },
    { env: 'FEISHU_DOMAIN', path: 'domain', kind: 'string' },
    { env: 'FEISHU_MODE', path: 'mode', kind: 'string' },
    { env: 'FEISHU_ENCRYPT_KEY', path: 'encryptKey', kind: 'string', secret: true },
    { env: 'FEISHU_VERIFICATION_TOKEN', path: 'verificationToken', kind: 'string', secret: true },
    { env: 'FEISHU_WEBHOOK_PATH', path: 'webhookPath', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createFeishuPlugin(config, deps),
});
