/**
 * What every channel's end-to-end harness wires the same way: the real
 * channel host on a harness's Redis and queue (no features) with a plugin's
 * routes on an HTTP server, and a runner delivering the plugin's
 * conversations through its outbound side.
 */
import { runnerFeatures } from '../../app/features/index.js';
import type { HostFeature } from '../../host/feature.js';
import type { HttpServer } from '../../host/http.js';
import { routeRegistry } from '../../host/http.js';
import { type ChannelSettings, createChannelHost } from '../../host/receive.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';

/** Starts `plugin` on the real channel host over `h`, its routes on `http`; `settings`: the channel's (admins, policy); `features`: the host's (default none). */
export async function hostChannel(
  h: RunnerHarness,
  http: HttpServer,
  plugin: ChannelPlugin,
  settings?: () => ChannelSettings,
  features: HostFeature[] = [],
): Promise<void> {
  const { logger, redis } = h.ctx;
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis,
    prefix: h.prefix,
    logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === plugin.id ? plugin.outbound : undefined),
    ...(settings && { settings }),
    features,
  });
  await plugin.start(host);
}

/** Starts a runner with `agent` on `h` that delivers `<plugin id>:` conversations through `plugin` (added to `h.runners`). */
export async function runnerFor(h: RunnerHarness, agent: RunnerPlugin, plugin: ChannelPlugin): Promise<void> {
  const runner = await startRunner(h.ctx, {
    plugin: agent,
    resolveOutbound: (cid) => (cid.startsWith(`${plugin.id}:`) ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
}
