/**
 * The Discord channel's definition: id, settings and variables. The channel
 * itself (`channel.ts`, with discord.js) is imported when a Discord section
 * is configured, so a bot without Discord never loads discord.js.
 */
import { defineChannelPlugin } from '../../src/channel.js';
import { discordConfigSchema } from './config.js';

/** The Discord channel (`channels.discord`), on when `DISCORD_BOT_TOKEN` is set. */
export default defineChannelPlugin({
  id: 'discord',
  kind: 'channel',
  description: 'Discord bots through the gateway and REST API (discord.js).',
  configSchema: discordConfigSchema,
  env: [
    { env: 'DISCORD_BOT_TOKEN', path: 'token', kind: 'string', secret: true, enables: true },
    { env: 'DISCORD_API_BASE', path: 'apiBase', kind: 'string' },
  ],
  create: async (config, deps) => (await import('./channel.js')).createDiscordPlugin(config, deps),
});
