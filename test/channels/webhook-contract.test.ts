/** The webhook channel passes the channel contract (plain HTTP in, signed callbacks out). */
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { channelPluginContract } from '../../testing/channel-contract.js';
import { startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { redisUrl } from '../helpers/redis.js';

const SECRET = 'whsec-contract-0123456789';

channelPluginContract({
  name: 'webhook',
  redisUrl: redisUrl(),
  makeHarness: async (env) => {
    const callbacks = await startCallbackServer(SECRET);
    const plugin = createWebhookPlugin(
      'contract',
      { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 },
      { logger: env.logger, redis: env.redis, prefix: env.prefix },
    );
    return {
      plugin,
      async inject(m) {
        const body = JSON.stringify({ id: m.updateId, conversation: m.chatId, sender: m.sender, text: m.text });
        const res = await fetch(`${env.baseUrl()}/webhooks/contract`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, body) },
          body,
        });
        if (res.status >= 400 && res.status !== 403) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
      },
      expected: (m) => ({ updateKey: `webhook:contract:${m.updateId}`, conversationId: `webhook:contract:${m.chatId}` }),
      received: async (chatId) => callbacks.texts(chatId),
      close: () => callbacks.close(),
    };
  },
});
