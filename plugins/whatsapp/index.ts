/**
 * The WhatsApp channel (WhatsApp Business Cloud API): the definition — id,
 * settings, variables, the keys it keeps. The Graph API calls are a few
 * requests over `fetch` (`graph.ts`): no well-kept SDK for the Cloud API
 * exists. The channel itself is imported when a WhatsApp section is configured.
 */
import { defineChannelPlugin } from 'steerbot/channel';
import { whatsappConfigSchema } from './config.js';
import { WHATSAPP_CONVERSATION_KEYS, WHATSAPP_PLUGIN_ID } from './keys.js';

/** The WhatsApp channel (`channels.whatsapp`), on when `WHATSAPP_ACCESS_TOKEN` is set. */
export default defineChannelPlugin({
  id: WHATSAPP_PLUGIN_ID,
  kind: 'channel',
  description: 'WhatsApp through the official Cloud API (Graph API): a signed webhook in, messages out.',
  configSchema: whatsappConfigSchema,
  storage: { conversationKeys: WHATSAPP_CONVERSATION_KEYS },
  redact: { headers: ['x-hub-signature-256'], paths: ['accessToken', 'appSecret', 'verifyToken'] },
  env: [
    { env: 'WHATSAPP_ACCESS_TOKEN', path: 'accessToken', kind: 'string', secret: true, enables: true },
    { env: 'WHATSAPP_PHONE_NUMBER_ID', path: 'phoneNumberId', kind: 'string' },
    { env: 'WHATSAPP_APP_SECRET', path: 'appSecret', kind: 'string', secret: true },
    { env: 'WHATSAPP_VERIFY_TOKEN', path: 'verifyToken', kind: 'string', secret: true },
    { env: 'WHATSAPP_GRAPH_API_URL', path: 'graphApiUrl', kind: 'string' },
    { env: 'WHATSAPP_GRAPH_API_VERSION', path: 'graphApiVersion', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createWhatsAppPlugin(config, deps),
});
