/**
 * The WhatsApp channel's implementation: deliveries arrive on the plugin's
 * own webhook route (`webhook.ts`), are handled by `inbound.ts`, and
 * replies go out through `outbound.ts`, all over the Graph API client of
 * `graph.ts` (plain `fetch`: there is no well-kept SDK for the Cloud API).
 */
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, refuseMovedSettings } from 'steerbot/plugin';
import { type WhatsAppConfig, type WhatsAppConfigInput, whatsappConfigSchema } from './config.js';
import { failureProblems } from './failures.js';
import { GraphClient } from './graph.js';
import { WhatsAppInbound } from './inbound.js';
import { createWhatsAppOutbound } from './outbound.js';
import { registerWebhookRoutes } from './webhook.js';

export type { WhatsAppConfigInput } from './config.js';

const CHANNEL_ID = 'whatsapp';

function parseConfig(config: WhatsAppConfigInput): WhatsAppConfig {
  return parseSection(whatsappConfigSchema, config, ['channels', CHANNEL_ID]);
}

/**
 * Creates the WhatsApp channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createWhatsAppPlugin(config: WhatsAppConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  refuseMovedSettings(cfg, ['channels', 'whatsapp'], {
    allowedUsers: 'access.channels.whatsapp.users',
    policy: 'profiles.<name>.inputPolicy bound to whatsapp',
  });
  const logger = deps.logger.child({ channel: CHANNEL_ID });
  const graph = new GraphClient({
    baseUrl: cfg.graphApiUrl,
    version: cfg.graphApiVersion,
    accessToken: cfg.accessToken,
    timeoutMs: cfg.timeoutMs,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  const common = { channelId: CHANNEL_ID, graph, redis: deps.redis, prefix: deps.prefix, logger };
  const outbound = createWhatsAppOutbound({
    ...common,
    phoneNumberId: cfg.phoneNumberId,
    typingRefreshMs: cfg.typingRefreshMs,
    ...(cfg.reactions && { reactions: cfg.reactions }),
    linkPreviews: cfg.linkPreviews,
  });
  const inbound = new WhatsAppInbound({ ...common, cfg, outbound });
  // The route stays with the host's server; readiness is whether it was registered.
  const state = { started: false };
  return {
    id: CHANNEL_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    conversationProblems: failureProblems(deps.redis, deps.prefix),
    async start(host: ChannelHost) {
      registerWebhookRoutes(host.routes, {
        path: cfg.webhookPath,
        appSecret: cfg.appSecret,
        verifyToken: cfg.verifyToken,
        handle: (payload) => inbound.handle(host, payload),
      });
      state.started = true;
      logger.info({ path: cfg.webhookPath, phoneNumberId: cfg.phoneNumberId }, 'whatsapp webhook ready');
    },
    async stop() {
      state.started = false;
    },
    ready: () => (state.started ? { ready: true } : { ready: false, detail: 'webhook not registered' }),
  };
}
