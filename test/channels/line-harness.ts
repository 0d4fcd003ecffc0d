/**
 * The LINE channel wired end to end on a RunnerHarness: a host HTTP server
 * listening on a local port (tests post signed deliveries to it), the real
 * plugin (the real SDK) against the fake LINE API, the real channel host
 * enqueueing runs, and a runner with `agent` delivering through the plugin.
 */
import { runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createLinePlugin, type LineConfigInput } from '../../plugins/line/channel.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeLine, LINE_TEST, postLineDelivery } from '../../testing/fakes/line-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

/** What `startLineSystem` started: stop `plugin`, then close `http`, when done. */
export interface LineSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** POSTs a delivery to the webhook, signed with the channel secret as LINE does; resolves with the status. */
  deliver(payload: unknown): Promise<number>;
  /** The webhook's URL. */
  url: string;
}

export async function startLineSystem(o: { h: RunnerHarness; line: FakeLine; agent: RunnerPlugin; config?: Partial<LineConfigInput> }): Promise<LineSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createLinePlugin({ ...LINE_TEST, apiBaseURL: o.line.apiUrl, ...o.config }, { logger, redis, prefix: h.prefix });
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis,
    prefix: h.prefix,
    logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === plugin.id ? plugin.outbound : undefined),
    features: [],
  });
  await plugin.start(host);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  const runner = await startRunner(h.ctx, {
    plugin: o.agent,
    resolveOutbound: (cid) => (cid.startsWith('line:') ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  const url = `${address}${o.config?.webhookPath ?? '/line/webhook'}`;
  return { http, plugin, url, deliver: async (payload) => (await postLineDelivery(url, payload, LINE_TEST.channelSecret)).status };
}
