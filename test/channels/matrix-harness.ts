import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { channelPurged } from '../../host/main.js';
import { createChannelHost } from '../../host/receive.js';
import { createMatrixPlugin, type MatrixConfigInput } from '../../plugins/matrix/channel.js';
import matrixDefinition from '../../plugins/matrix/index.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { declaredConversationKeys } from '../../src/plugin/storage.js';
import { dispatchFromConfig } from '../../src/protocol/dispatch-config.js';
import { type FakeMatrix, MATRIX_TEST } from '../../testing/fakes/matrix-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { runnerFor } from './system.js';

/** What `startMatrixSystem` started: stop `plugin`, then close `http`, when done. */
export interface MatrixSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
}

/** A Matrix channel plugin on the harness's Redis, against the fake (through `fetch` when given). */
export function matrixPlugin(h: RunnerHarness, matrix: FakeMatrix, config: Partial<MatrixConfigInput> = {}, fetch?: typeof globalThis.fetch): ChannelPlugin {
  return createMatrixPlugin(
    { ...MATRIX_TEST, homeserverUrl: matrix.url, ...config },
    { logger: h.ctx.logger, redis: h.ctx.redis, prefix: h.prefix, ...(fetch && { fetch }) },
  );
}

/**
 * Starts `plugin` with a channel host on the harness (no runner). Its
 * commands run with the plugin's conversation keys declared, as the app
 * wires them (`/purge` deletes them).
 */
export async function startMatrixHost(h: RunnerHarness, plugin: ChannelPlugin): Promise<HttpServer> {
  const { logger, redis, config } = h.ctx;
  const http = createHttpServer({ config, redis, logger });
  const pluginKeys = declaredConversationKeys([matrixDefinition]);
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis,
    prefix: h.prefix,
    logger,
    dispatch: dispatchFromConfig(config, redis, h.dispatch.options.steeringCapable, pluginKeys),
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === plugin.id ? plugin.outbound : undefined),
    // The channel's purge hook, as the host adds it (`ChannelPlugin.purged`).
    features: [channelPurged((cid) => (cid.startsWith(`${plugin.id}:`) ? plugin.purged?.bind(plugin) : undefined))],
  });
  await plugin.start(host);
  return http;
}

/** The plugin, its host and a runner answering with `agent`. */
export async function startMatrixSystem(o: {
  h: RunnerHarness;
  matrix: FakeMatrix;
  agent: RunnerPlugin;
  config?: Partial<MatrixConfigInput>;
}): Promise<MatrixSystem> {
  const plugin = matrixPlugin(o.h, o.matrix, o.config);
  const http = await startMatrixHost(o.h, plugin);
  await runnerFor(o.h, o.agent, plugin);
  return { http, plugin };
}

/** Waits until the bot polls incrementally (`since` given): messages posted from then on are new to it. */
export async function untilSyncing(matrix: FakeMatrix, after = 0): Promise<void> {
  await matrix.waitUntil(() => matrix.calls.slice(after).some((c) => c.kind === 'sync' && c.query.since !== undefined), 10_000, 'an incremental /sync');
}
