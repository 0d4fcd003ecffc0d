/**
 * The generic webhook channel: your system POSTs signed JSON messages to
 * `<path>` (default `/webhooks/<name>`) and gets replies as signed POSTs to
 * its callback URL and/or on a Server-Sent Events stream per conversation.
 * Channel id `webhook:<name>`; conversation id `webhook:<name>:<conversation>`;
 * update key `webhook:<name>:<body id>` (the signed body's `id`).
 * The wire format is in the README (channels section).
 */

import { type ChannelDeps, type ChannelHost, type ChannelPlugin, defineChannelPlugin } from 'steerbot/channel';
import { createHttpClient, parseSection, refuseMovedSettings, signedFileStore } from 'steerbot/plugin';
import { z } from 'zod';
import { CallbackPump } from './callbacks.js';
import { WEBHOOK_NAME_RE, type WebhookChannelConfig, type WebhookChannelConfigInput, webhookChannelConfigSchema } from './config.js';
import { EventStreams } from './events.js';
import { inboundHandler, signedBySender } from './inbound.js';
import { WEBHOOK_CONVERSATION_KEYS, WEBHOOK_PLUGIN_ID } from './keys.js';
import { createWebhookOutbound } from './outbound.js';
import { callbackProblems } from './problems.js';

export type { WebhookChannelConfigInput } from './config.js';

function parseConfig(name: string, config: WebhookChannelConfigInput): WebhookChannelConfig {
  const issues = WEBHOOK_NAME_RE.test(name)
    ? []
    : [{ path: `channels.webhooks.${name}`, message: 'name must be 1-32 characters of a-z 0-9 _ - (starting with a letter or digit)' }];
  return parseSection(webhookChannelConfigSchema, config, ['channels', 'webhooks', name], issues);
}

/**
 * Creates the webhook channel `name`. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createWebhookPlugin(name: string, config: WebhookChannelConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(name, config);
  refuseMovedSettings(cfg, ['channels', 'webhooks', name], {
    allowedSenders: `access.channels.webhook:${name}.users`,
    policy: `profiles.<name>.inputPolicy bound to webhook:${name}`,
  });
  const channelId = `webhook:${name}`;
  const path = cfg.path ?? `/webhooks/${name}`;
  const logger = deps.logger.child({ channel: channelId });
  const now = Date.now;
  let host: ChannelHost | undefined;
  const streams = new EventStreams({ channelId, config: cfg, redis: () => deps.redis, prefix: deps.prefix, logger, now });
  // Sent files are kept for signed download only where the operator said where downloads are reached from.
  const files = cfg.filesUrl
    ? signedFileStore({
        redis: deps.redis,
        prefix: deps.prefix,
        path: `${path}/files`,
        baseUrl: cfg.filesUrl,
        ttlSeconds: cfg.fileTtlSeconds,
        secret: cfg.callbackSecret ?? cfg.secret,
        now,
      })
    : undefined;
  const outbound = createWebhookOutbound({ channelId, config: cfg, redis: deps.redis, prefix: deps.prefix, ...(files && { files }) });
  // Only started channels (hosts) POST callbacks; runners only store replies. The POSTs go over keep-alive
  // connections of the channel's own pool (created at start, closed at stop).
  let http: ReturnType<typeof createHttpClient> | undefined;
  const pump = cfg.callbackUrl
    ? new CallbackPump({ channelId, config: cfg, redis: deps.redis, prefix: deps.prefix, logger, request: (url, init) => http!.request(url, init) })
    : undefined;

  return {
    id: channelId,
    // Who may talk is the access gate's, the input policy a profile's; `admins` here only for a plugin built in code.
    settings: { admins: cfg.admins },
    outbound,
    conversationProblems: callbackProblems(deps.redis, deps.prefix, now),
    async start(h: ChannelHost) {
      host = h;
      const inbound = { name, channelId, config: cfg, host: () => host!, now };
      h.routes.add({
        method: 'POST',
        path,
        bodyLimitBytes: cfg.maxBodyBytes,
        handle: inboundHandler(inbound),
        // A signed request continues the sender's trace (`traceparent`); an unsigned one starts its own.
        trustsCallerTrace: signedBySender(inbound),
      });
      h.routes.add({ method: 'GET', path: `${path}/conversations/:conversation/events`, handle: streams.handler() });
      if (files) h.routes.add(files.route());
      if (pump) {
        http ??= createHttpClient({ maxSocketsPerOrigin: 16 });
        pump.start();
      }
      logger.info({ path, callbacks: pump !== undefined }, 'webhook channel ready');
    },
    async stop() {
      streams.closeAll();
      await pump?.stop();
      http?.close();
      http = undefined;
    },
  };
}

/** Settings of every webhook channel by name (`channels.webhooks.<name>`). */
const webhooksConfigSchema = z.record(z.string(), webhookChannelConfigSchema).superRefine((hooks, ctx) => {
  for (const name of Object.keys(hooks)) {
    if (!WEBHOOK_NAME_RE.test(name))
      ctx.addIssue({ code: 'custom', path: [name], message: 'bad webhook name: expected 1-32 characters of a-z 0-9 _ - (starting with a letter or digit)' });
  }
});

/** Generic webhook channels (`channels.webhooks.<name>`): one channel `webhook:<name>` per entry. */
export default defineChannelPlugin({
  id: WEBHOOK_PLUGIN_ID,
  kind: 'channel',
  storage: { conversationKeys: WEBHOOK_CONVERSATION_KEYS },
  redact: { headers: ['x-steerbot-signature'], paths: ['*.secret', '*.callbackSecret'] },
  description: 'Generic signed-JSON webhook channels with callbacks and an event stream, one per name.',
  configSchema: webhooksConfigSchema,
  create: (config, deps) => Object.entries(config).map(([name, cfg]) => createWebhookPlugin(name, cfg, deps)),
});
