/**
 * The Feishu / Lark channel wired end to end on a RunnerHarness: a host HTTP
 * server listening on a local port (http-mode callbacks are POSTed to it),
 * the real plugin (the real SDK: its client, and its long connection in ws
 * mode) against the fake open platform, the real channel host enqueueing
 * runs, and a runner with `agent` delivering through the plugin.
 */
import { runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createFeishuPlugin, type FeishuConfigInput } from '../../plugins/feishu/channel.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { FEISHU_TEST } from '../../testing/fakes/feishu-events.js';
import type { FakeFeishu } from '../../testing/fakes/feishu-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

/** What `startFeishuSystem` started: stop `plugin`, then close `http`, when done. */
export interface FeishuSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** The callback route's URL (http mode). */
  url: string;
}

export async function startFeishuSystem(o: {
  h: RunnerHarness;
  feishu: FakeFeishu;
  agent: RunnerPlugin;
  config?: Partial<FeishuConfigInput>;
  fetch?: typeof fetch;
}): Promise<FeishuSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createFeishuPlugin(
    { ...FEISHU_TEST, domain: o.feishu.url, ...o.config },
    { logger, redis, prefix: h.prefix, ...(o.fetch && { fetch: o.fetch }) },
  );
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
    resolveOutbound: (cid) => (cid.startsWith('feishu:') ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  return { http, plugin, url: `${address}${o.config?.webhookPath ?? '/feishu/events'}` };
}
