import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createFeishuPlugin, type FeishuConfigInput } from '../../plugins/feishu/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { FEISHU_TEST } from '../../testing/fakes/feishu-events.js';
import type { FakeFeishu } from '../../testing/fakes/feishu-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

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
  await hostChannel(h, http, plugin);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  await runnerFor(h, o.agent, plugin);
  return { http, plugin, url: `${address}${o.config?.webhookPath ?? '/feishu/events'}` };
}
