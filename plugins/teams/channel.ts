/**
 * The Microsoft Teams channel's implementation, on the Microsoft 365 Agents
 * SDK (`@microsoft/agents-hosting`, the successor of the Bot Framework SDK):
 * activities arrive on the plugin's own messaging endpoint (`webhook.ts`),
 * their Bot Service tokens checked against its published keys (`auth.ts`),
 * are handled by `inbound.ts`, and replies go out through `outbound.ts` over
 * the SDK's `ConnectorClient`. The SDK's `CloudAdapter` and `authorizeJWT`
 * are not used: the adapter wants an Express request and runs its own turn
 * pipeline, where the host already has routes, dedupe and runs, and
 * `authorizeJWT` also takes tokens the tenant's Entra issues to any of its
 * apps. This module, and with it the SDK, is imported only when a Teams
 * section is configured.
 */
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, replayWindowSeconds, signedFileStore } from 'steerbot/plugin';
import { CLOCK_TOLERANCE_SECONDS, ServiceUrlPolicy, tokenChecker } from './auth.js';
import { type TeamsConfig, type TeamsConfigInput, teamsConfigSchema } from './config.js';
import { TeamsInbound } from './inbound.js';
import { TEAMS_PLUGIN_ID } from './keys.js';
import { createTeamsOutbound } from './outbound.js';
import { TokenSource } from './token.js';
import { registerWebhookRoute } from './webhook.js';

export type { TeamsConfigInput } from './config.js';

/** Route prefix of the files Teams shows or links (`<filesUrl>/teams/files/<conversation>/<id>?…`). */
const FILES_PATH = '/teams/files';

function parseConfig(config: TeamsConfigInput): TeamsConfig {
  return parseSection(teamsConfigSchema, config, ['channels', TEAMS_PLUGIN_ID]);
}

/**
 * Creates the Teams channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field. `deps.fetch` gets the
 * bot's token and Bot Service's signing keys; the SDK's connector client
 * calls the global `fetch`.
 */
export function createTeamsPlugin(config: TeamsConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: TEAMS_PLUGIN_ID });
  const policy = new ServiceUrlPolicy(cfg.serviceUrlHosts, cfg.microsoftHosts);
  const tokens = new TokenSource({ ...cfg, ...(deps.fetch && { fetch: deps.fetch }) });
  // URLs are signed with a key kept in Redis, not the client secret: rotating the secret keeps sent links working.
  const store = cfg.filesUrl
    ? signedFileStore({ redis: deps.redis, prefix: deps.prefix, path: FILES_PATH, baseUrl: cfg.filesUrl, ttlSeconds: cfg.fileTtlSeconds })
    : undefined;
  const outbound = createTeamsOutbound({
    channelId: TEAMS_PLUGIN_ID,
    redis: deps.redis,
    prefix: deps.prefix,
    tokens,
    policy,
    defaultServiceUrl: cfg.serviceUrl,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    secrets: [cfg.appPassword],
    ...(store && { files: { store, maxBytes: cfg.maxFileBytes } }),
  });
  const inbound = new TeamsInbound({ channelId: TEAMS_PLUGIN_ID, redis: deps.redis, prefix: deps.prefix, logger, outbound });
  const checkToken = tokenChecker({
    appId: cfg.appId,
    keysUrl: cfg.botFrameworkKeysUrl,
    timeoutMs: cfg.timeoutMs,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  // The route stays with the host's server; readiness is whether it was registered.
  const state = { started: false };
  return {
    id: TEAMS_PLUGIN_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    async start(host: ChannelHost) {
      registerWebhookRoute(host.routes, {
        path: cfg.webhookPath,
        checkToken,
        policy,
        maxTokenLifeSeconds: Math.max(60, replayWindowSeconds(host.dedupeTtlSeconds) - CLOCK_TOLERANCE_SECONDS),
        handle: (activity) => inbound.handle(host, activity),
        refused: (reason) => logger.info({ reason }, 'teams activity refused'),
      });
      if (store) host.routes.add(store.route());
      state.started = true;
      logger.info({ path: cfg.webhookPath }, 'teams messaging endpoint ready');
    },
    async stop() {
      state.started = false;
    },
    ready: () => (state.started ? { ready: true } : { ready: false, detail: 'messaging endpoint not registered' }),
  };
}
