/**
 * The Discord channel's implementation: a discord.js gateway client on the inbound side, REST
 * calls on the outbound side.
 *
 * Inbound answers DMs, guild messages that mention the bot (or reply to it),
 * every message in `alwaysChannels`, and threads as their own conversations.
 * Update identity is the message id, so a MESSAGE_CREATE replayed after a
 * gateway resume is a duplicate the host's dedupe drops. Messages that never
 * came over the gateway (no host connected, or a session Discord would not
 * resume) are read back over REST at each new session (`catch-up.ts`).
 */
import type { ChannelDeps, ChannelPlugin } from 'steerbot/channel';
import { parseSection, refuseMovedSettings } from 'steerbot/plugin';
import { type DiscordConfig, type DiscordConfigInput, discordConfigSchema } from './config.js';
import { DiscordGateway } from './gateway.js';
import { createDiscordOutbound, createRest } from './outbound.js';

export type { DiscordConfigInput } from './config.js';

/** Channel id of the Discord channel (the prefix of its conversation ids). */
const CHANNEL_ID = 'discord';

/**
 * Creates the Discord channel plugin. `config` is validated (defaults
 * applied); a bad one throws ConfigError naming `channels.discord.<field>`.
 */
export function createDiscordPlugin(config: DiscordConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  refuseMovedSettings(cfg, ['channels', 'discord'], {
    allowedUsers: 'access.channels.discord.users',
    allowedChats: 'access.channels.discord.groups',
    policy: 'profiles.<name>.inputPolicy bound to discord',
  });
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const outbound = createDiscordOutbound(CHANNEL_ID, cfg, createRest(cfg, deps.fetch));
  // The gateway session's state (client, inbound queue, cursors, readiness) lives in one object.
  const gateway = new DiscordGateway(CHANNEL_ID, cfg, deps, logger);
  return {
    id: CHANNEL_ID,
    // Who may talk is the access gate's, the input policy a profile's; `admins` here only for a plugin built in code.
    settings: { admins: cfg.admins },
    outbound,
    start: (host) => gateway.start(host),
    ready: () => gateway.ready(),
    stop: () => gateway.stop(),
  };
}

function parseConfig(config: DiscordConfigInput): DiscordConfig {
  return parseSection(discordConfigSchema, config, ['channels', 'discord']);
}
