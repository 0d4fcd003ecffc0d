/**
 * The Matrix channel's implementation: a bot account's `/sync` long poll
 * (`syncer.ts`, one syncing host by a Redis lease, `since` kept in Redis)
 * feeds `inbound.ts`; replies go out through `outbound.ts`. Both talk to the
 * homeserver through `client.ts` (plain `fetch`).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ChannelDeps, ChannelHost, ChannelPlugin } from 'steerbot/channel';
import { parseSection, storage } from 'steerbot/plugin';
import { MatrixClient } from './client.js';
import { type MatrixConfig, type MatrixConfigInput, matrixConfigSchema } from './config.js';
import { MatrixInbound } from './inbound.js';
import { MATRIX_PLUGIN_ID, sinceKey, syncLeaseKey } from './keys.js';
import { createMatrixOutbound } from './outbound.js';
import { dropThreadPointers } from './poll-store.js';
import { matrixSyncer } from './syncer.js';

export type { MatrixConfigInput } from './config.js';

function parseConfig(config: MatrixConfigInput): MatrixConfig {
  return parseSection(matrixConfigSchema, config, ['channels', MATRIX_PLUGIN_ID]);
}

/**
 * Creates the Matrix channel plugin. `config` is validated here (defaults
 * applied); throws ConfigError naming every bad field.
 */
export function createMatrixPlugin(config: MatrixConfigInput, deps: ChannelDeps): ChannelPlugin {
  const cfg = parseConfig(config);
  const logger = deps.logger.child({ channel: MATRIX_PLUGIN_ID });
  const client = new MatrixClient({
    homeserverUrl: cfg.homeserverUrl,
    accessToken: cfg.accessToken,
    timeoutMs: cfg.timeoutMs,
    rateLimitRetryMs: cfg.rateLimitRetryMs,
    ...(deps.fetch && { fetch: deps.fetch }),
  });
  const outbound = createMatrixOutbound({
    channelId: MATRIX_PLUGIN_ID,
    client,
    selfId: cfg.userId,
    redis: deps.redis,
    prefix: deps.prefix,
    reactions: cfg.reactions,
    linkPreviews: cfg.linkPreviews,
    maxFileBytes: cfg.maxFileBytes,
    mediaTimeoutMs: cfg.mediaTimeoutMs,
    logger,
    ...(cfg.streaming && { streamEditIntervalMs: cfg.streamEditIntervalMs }),
  });
  const inbound = new MatrixInbound({
    channelId: MATRIX_PLUGIN_ID,
    client,
    selfId: cfg.userId,
    autoJoin: cfg.autoJoin,
    send: (conversationId, text, opts) => outbound.send(conversationId, text, opts),
    logger,
  });
  // The inbound side's state is the syncer's, made on start.
  const state: { syncer?: ReturnType<typeof matrixSyncer> } = {};
  return {
    id: MATRIX_PLUGIN_ID,
    // Who may talk is the access gate's, the input policy a profile's.
    settings: {},
    outbound,
    async start(host: ChannelHost) {
      const owner = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
      state.syncer = matrixSyncer({
        client,
        lease: new storage.RedisLease(host.redis, syncLeaseKey(host.prefix), owner, cfg.syncLeaseMs),
        redis: host.redis,
        sinceKey: sinceKey(host.prefix, cfg.homeserverUrl, cfg.userId),
        timeoutMs: cfg.syncTimeoutMs,
        logger,
        handle: (sync, initial) => inbound.handle(host, sync, initial),
      });
      state.syncer.start();
      logger.info({ user: cfg.userId, owner }, 'matrix sync started (one host syncs at a time)');
    },
    async stop() {
      await state.syncer?.stop();
    },
    ready: () => state.syncer?.state() ?? { ready: false, detail: 'not started' },
    // A purged thread's polls went with its keys; its room's pointers at them are another conversation's (a response names only the room).
    purged: async (conversationId) => void (await dropThreadPointers(deps.redis, deps.prefix, MATRIX_PLUGIN_ID, conversationId)),
  };
}
