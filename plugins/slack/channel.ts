/**
 * The Slack channel's implementation: events arrive over Socket Mode (when
 * an app-level token is set) or at the Events API routes, are normalized and
 * handed to the host; replies go out through `outbound` in the
 * conversation's thread. Both on Slack's official clients.
 */
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, refuseMovedSettings, replayWindowSeconds, storage } from 'steerbot/plugin';
import { createWebClient } from './api.js';
import { modeOf, type SlackConfig, type SlackConfigInput, slackConfigSchema } from './config.js';
import { SlackInbound } from './inbound.js';
import { createSlackOutbound } from './outbound.js';
import { registerSlackRoutes } from './routes.js';
import { SlackSocket, type SocketHandlers } from './socket.js';

export type { SlackConfigInput } from './config.js';

const CHANNEL_ID = 'slack';

function parseConfig(config: SlackConfigInput): SlackConfig {
  return parseSection(slackConfigSchema, config, ['channels', CHANNEL_ID]);
}

/**
 * Creates the Slack channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createSlackPlugin(config: SlackConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  refuseMovedSettings(cfg, ['channels', 'slack'], {
    allowedUsers: 'access.channels.slack.users',
    allowedChats: 'access.channels.slack.groups',
    policy: 'profiles.<name>.inputPolicy bound to slack',
  });
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const fetchFn = deps.fetch;
  const web = createWebClient(cfg.botToken, cfg.apiUrl, logger, fetchFn);
  const outbound = createSlackOutbound({
    channelId: CHANNEL_ID,
    web,
    token: cfg.botToken,
    ...(cfg.streaming && { streamEditIntervalMs: cfg.streamEditIntervalMs }),
    ...(cfg.reactions && { reactions: cfg.reactions }),
    linkPreviews: cfg.linkPreviews,
    fileOrigins: [new URL(cfg.apiUrl).origin, ...cfg.filesOrigins.map((u) => new URL(u).origin)],
    logger,
    ...(fetchFn && { fetch: fetchFn }),
  });
  const inbound = new SlackInbound(CHANNEL_ID, web, cfg.botToken, storage.pluginStorage(deps.prefix, CHANNEL_ID), logger);
  const mode = modeOf(cfg);
  let socket: SlackSocket | undefined;
  let started = false;

  return {
    id: CHANNEL_ID,
    // Who may talk is the access gate's, the input policy a profile's; `admins` here only for a plugin built in code.
    settings: { admins: cfg.admins },
    outbound,
    async start(host: ChannelHost) {
      const bot = await inbound.identify();
      const handlers: SocketHandlers = { event: (e) => inbound.handleEvent(host, e), interaction: (p) => inbound.handleInteraction(host, p) };
      if (mode === 'socket') {
        socket = new SlackSocket({ appToken: cfg.appToken as string, apiUrl: cfg.apiUrl, logger, ...(fetchFn && { fetch: fetchFn }) }, handlers);
        await socket.start();
        logger.info({ bot: bot.userId }, 'slack socket mode connected');
      } else {
        const { eventsPath, interactivityPath } = cfg;
        // A replay is refused by its signed timestamp only while a replay of it is still deduped: the skew never outlasts the dedupe window.
        const maxSkewSeconds = Math.min(cfg.maxSkewSeconds, replayWindowSeconds(host.dedupeTtlSeconds));
        registerSlackRoutes(host.routes, { eventsPath, interactivityPath, maxSkewSeconds, signingSecret: cfg.signingSecret as string, handlers });
        logger.info({ bot: bot.userId, eventsPath, interactivityPath }, 'slack events api routes ready');
      }
      started = true;
    },
    async stop() {
      started = false;
      await socket?.stop();
      socket = undefined;
    },
    ready() {
      if (socket) return socket.ready();
      return started ? { ready: true } : { ready: false, detail: 'slack channel not started' };
    },
  };
}
