import { createHttpServer, type HttpServer } from '../../host/http.js';
import { createMatrixPlugin, type MatrixConfigInput } from '../../plugins/matrix/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeMatrix, MATRIX_TEST } from '../../testing/fakes/matrix-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

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

/** Starts `plugin` with a channel host on the harness (no runner). */
export async function startMatrixHost(h: RunnerHarness, plugin: ChannelPlugin): Promise<HttpServer> {
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  await hostChannel(h, http, plugin);
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
