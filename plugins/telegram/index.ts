/**
 * The Telegram channel's definition: id, settings and variables. The channel
 * itself (`channel.ts`, with grammY) is imported when a Telegram section is
 * configured, so a bot without Telegram never loads grammY.
 */
import { defineChannelPlugin } from '../../src/channel.js';
import { telegramConfigSchema } from './config.js';

/** The Telegram channel (`channels.telegram`), on when `TELEGRAM_BOT_TOKEN` is set. */
export default defineChannelPlugin({
  id: 'telegram',
  kind: 'channel',
  description: 'Telegram bots through the Bot API (grammY): webhook or long polling.',
  configSchema: telegramConfigSchema,
  env: [
    { env: 'TELEGRAM_BOT_TOKEN', path: 'token', kind: 'string', secret: true, enables: true },
    { env: 'TELEGRAM_MODE', path: 'mode', kind: 'string' },
    { env: 'TELEGRAM_WEBHOOK_SECRET', path: 'webhookSecret', kind: 'string', secret: true },
    { env: 'TELEGRAM_API_ROOT', path: 'apiRoot', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createTelegramPlugin(config, deps),
});
