/**
 * The LINE channel's implementation: deliveries arrive on the plugin's own
 * webhook route (`webhook.ts`), are handled by `inbound.ts`, and replies go
 * out through `outbound.ts` over the SDK's Messaging API client
 * (`@line/bot-sdk`, LINE's maintained SDK: typed requests, the
 * `X-Line-Retry-Key` parameter, `validateSignature`). This module, and with
 * it the SDK, is imported only when a LINE section is configured.
 */
import { messagingApi } from '@line/bot-sdk';
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, signedFileStore } from 'steerbot/plugin';
import { type LineConfig, type LineConfigInput, lineConfigSchema } from './config.js';
import { LineInbound } from './inbound.js';
import { LINE_PLUGIN_ID } from './keys.js';
import { createLineOutbound } from './outbound.js';
import { registerWebhookRoute } from './webhook.js';

export type { LineConfigInput } from './config.js';

/** Route prefix of the files LINE fetches (`<filesUrl>/line/files/<conversation>/<id>?…`). */
const FILES_PATH = '/line/files';

function parseConfig(config: LineConfigInput): LineConfig {
  return parseSection(lineConfigSchema, config, ['channels', LINE_PLUGIN_ID]);
}

/**
 * Creates the LINE channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field. The SDK calls the
 * global `fetch` (it takes no other), so `deps.fetch` is not used.
 */
export function createLinePlugin(config: LineConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: LINE_PLUGIN_ID });
  const client = new messagingApi.MessagingApiClient({ channelAccessToken: cfg.channelAccessToken, baseURL: cfg.apiBaseURL });
  const common = { channelId: LINE_PLUGIN_ID, redis: deps.redis, prefix: deps.prefix, logger };
  const store = cfg.filesUrl
    ? signedFileStore({
        redis: deps.redis,
        prefix: deps.prefix,
        path: FILES_PATH,
        baseUrl: cfg.filesUrl,
        ttlSeconds: cfg.fileTtlSeconds,
        secret: cfg.channelSecret,
        // LINE's reference names an audio message's format by extension (.m4a): the URL carries it.
        extensionInUrl: true,
      })
    : undefined;
  const outbound = createLineOutbound({
    ...common,
    client,
    accessToken: cfg.channelAccessToken,
    replyTokenTtlMs: cfg.replyTokenTtlMs,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    loadingSeconds: cfg.loadingSeconds,
    ...(store && { files: { store, maxBytes: cfg.maxFileBytes } }),
  });
  const inbound = new LineInbound(common);
  // The route stays with the host's server; readiness is whether it was registered.
  const state = { started: false };
  return {
    id: LINE_PLUGIN_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    async start(host: ChannelHost) {
      registerWebhookRoute(host.routes, {
        path: cfg.webhookPath,
        channelSecret: cfg.channelSecret,
        handle: (payload) => inbound.handle(host, payload),
      });
      if (store) host.routes.add(store.route());
      state.started = true;
      logger.info({ path: cfg.webhookPath }, 'line webhook ready');
    },
    async stop() {
      state.started = false;
    },
    ready: () => (state.started ? { ready: true } : { ready: false, detail: 'webhook not registered' }),
  };
}
