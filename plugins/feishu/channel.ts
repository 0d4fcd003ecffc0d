/**
 * The Feishu / Lark channel's implementation, on `@larksuiteoapi/node-sdk`
 * (the platform's maintained SDK: the tenant access token kept fresh, typed
 * IM calls, the long connection's client and its protobuf frames, the
 * event dispatcher, the callbacks' cipher). Events and card clicks arrive
 * over the long connection (`ws`, the SDK's WSClient: no public URL) or at
 * the callback route (`http`, `callback.ts`), are handled by `inbound.ts`,
 * and replies go out through `outbound.ts`. This module, and with it the
 * SDK, is imported only when a Feishu section is configured.
 */
import { Client, LoggerLevel, WSClient } from '@larksuiteoapi/node-sdk';
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, replayWindowSeconds } from 'steerbot/plugin';
import { registerCallbackRoute } from './callback.js';
import { domainUrl, type FeishuConfig, type FeishuConfigInput, feishuConfigSchema } from './config.js';
import { fetchHttpInstance } from './http.js';
import { FeishuInbound, sdkLogger } from './inbound.js';
import { FEISHU_PLUGIN_ID } from './keys.js';
import { createFeishuOutbound } from './outbound.js';
import { tokenCache } from './token-cache.js';

export type { FeishuConfigInput } from './config.js';

function parseConfig(config: FeishuConfigInput): FeishuConfig {
  return parseSection(feishuConfigSchema, config, ['channels', FEISHU_PLUGIN_ID]);
}

/**
 * Creates the Feishu / Lark channel plugin. `config` is validated here
 * (defaults applied); throws ConfigError naming every bad field. The SDK's
 * HTTP goes through `deps.fetch` when given.
 */
export function createFeishuPlugin(config: FeishuConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: FEISHU_PLUGIN_ID });
  const httpInstance = fetchHttpInstance({
    secrets: [cfg.appSecret],
    timeoutMs: cfg.timeoutMs,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  const sdk = {
    appId: cfg.appId,
    appSecret: cfg.appSecret,
    domain: domainUrl(cfg.domain),
    httpInstance,
    logger: sdkLogger(logger),
    loggerLevel: LoggerLevel.warn,
  };
  // A cache of this plugin's own: the SDK's default is one per process, shared by every client of the same app id.
  const client = new Client({ ...sdk, cache: tokenCache() });
  const outbound = createFeishuOutbound({
    channelId: FEISHU_PLUGIN_ID,
    client,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    redis: deps.redis,
    prefix: deps.prefix,
    reactions: cfg.reactions,
  });
  const inbound = new FeishuInbound(FEISHU_PLUGIN_ID, logger, { redis: deps.redis, prefix: deps.prefix });
  const state: { ws: WSClient | undefined; started: boolean } = { ws: undefined, started: false };

  return {
    id: FEISHU_PLUGIN_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    async start(host: ChannelHost) {
      const bot = await inbound.identify(client);
      if (cfg.mode === 'http') {
        registerCallbackRoute(host.routes, {
          path: cfg.webhookPath,
          encryptKey: cfg.encryptKey as string,
          verificationToken: cfg.verificationToken as string,
          // A replay is refused by its signed timestamp only while a replay of it is still deduped: the skew never outlasts the dedupe window.
          maxSkewSeconds: Math.min(cfg.maxSkewSeconds, replayWindowSeconds(host.dedupeTtlSeconds)),
          dispatcher: inbound.dispatcher(host, false),
        });
        logger.info({ bot, path: cfg.webhookPath }, 'feishu callback route ready');
      } else {
        state.ws = await connect(sdk, inbound.dispatcher(host, true), cfg.timeoutMs);
        logger.info({ bot }, 'feishu long connection open');
      }
      state.started = true;
    },
    async stop() {
      state.started = false;
      state.ws?.close({ force: true });
      state.ws = undefined;
    },
    ready() {
      if (state.ws) return state.ws.getConnectionStatus().state === 'connected' ? { ready: true } : { ready: false, detail: 'feishu long connection not open' };
      return state.started ? { ready: true } : { ready: false, detail: 'feishu channel not started' };
    },
  };
}

/**
 * Opens the long connection; resolves once it is open, or after `timeoutMs`
 * (the SDK keeps trying; readiness says it is not open). Throws when the
 * platform refuses the app (wrong secret, long connection not enabled).
 */
async function connect(
  sdk: ConstructorParameters<typeof WSClient>[0],
  eventDispatcher: ReturnType<FeishuInbound['dispatcher']>,
  timeoutMs: number,
): Promise<WSClient> {
  let settle: (err?: Error) => void = () => undefined;
  const settled = new Promise<Error | undefined>((resolve) => {
    settle = resolve;
  });
  const ws = new WSClient({ ...sdk, autoReconnect: true, handshakeTimeoutMs: timeoutMs, onReady: () => settle(), onError: (err) => settle(err) });
  await ws.start({ eventDispatcher });
  const timer = setTimeout(() => settle(), timeoutMs);
  const err = await settled;
  clearTimeout(timer);
  if (err) {
    ws.close({ force: true });
    throw new Error(`feishu long connection refused: ${err.message}`);
  }
  return ws;
}
