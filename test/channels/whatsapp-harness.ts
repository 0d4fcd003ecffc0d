import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { channelProblems } from '../../host/main.js';
import { createWhatsAppPlugin, type WhatsAppConfigInput } from '../../plugins/whatsapp/channel.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeWhatsApp, postDelivery, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { hostChannel, runnerFor } from './system.js';

/** What `startWhatsAppSystem` started: stop `plugin`, then close `http`, when done. */
export interface WhatsAppSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
  /** POSTs a delivery to the webhook, signed with the app secret as Meta does; resolves with the status. */
  deliver(payload: unknown): Promise<number>;
  /** The webhook's URL. */
  url: string;
}

export async function startWhatsAppSystem(o: {
  h: RunnerHarness;
  wa: FakeWhatsApp;
  agent: RunnerPlugin;
  whatsapp?: Partial<WhatsAppConfigInput>;
}): Promise<WhatsAppSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: o.wa.graphUrl, ...o.whatsapp }, { logger, redis, prefix: h.prefix });
  await hostChannel(h, http, plugin, undefined, [channelProblems((id) => (id === plugin.id ? plugin.conversationProblems?.bind(plugin) : undefined))]);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  await runnerFor(h, o.agent, plugin);
  const url = `${address}/whatsapp/webhook`;
  return {
    http,
    plugin,
    url,
    deliver: async (payload) => (await postDelivery(url, payload, WHATSAPP_TEST.appSecret)).status,
  };
}
