import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createLinePlugin, type LineConfigInput } from '../../plugins/line/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeLine, LINE_TEST, postLineDelivery } from '../../testing/fakes/line-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

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
  await hostChannel(h, http, plugin);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  await runnerFor(h, o.agent, plugin);
  const url = `${address}${o.config?.webhookPath ?? '/line/webhook'}`;
  return { http, plugin, url, deliver: async (payload) => (await postLineDelivery(url, payload, LINE_TEST.channelSecret)).status };
}
