/** The webhook channel passes the channel contract (plain HTTP in, signed callbacks out). */
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { redisUrl } from '../helpers/redis.js';

const SECRET = 'whsec-contract-0123456789';

channelPluginContract({
  name: 'webhook',
  redisUrl: redisUrl(),
  // Buttons go out as the callback's `actions`; a click is the client's own signed message carrying the command.
  capabilities: { buttons: 'text' },
  makeHarness: async (env) => {
    const callbacks = await startCallbackServer(SECRET);
    const plugin = createWebhookPlugin(
      'contract',
      { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 },
      { logger: env.logger, redis: env.redis, prefix: env.prefix },
    );
    /** POSTs one signed inbound message, as the client does. */
    const post = async (m: ContractMessage) => {
      const body = JSON.stringify({ id: m.updateId, conversation: m.chatId, sender: m.sender, text: m.text });
      const res = await fetch(`${env.baseUrl()}/webhooks/contract`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, body) },
        body,
      });
      if (res.status >= 400 && res.status !== 403) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
    };
    const lastCallback = (chatId: string) => callbacks.accepted().findLast((c) => c.body.conversation === chatId);
    let clicks = 0;
    return {
      plugin,
      inject: post,
      expected: (m) => ({ updateKey: `webhook:contract:${m.updateId}`, conversationId: `webhook:contract:${m.chatId}` }),
      received: async (chatId) => callbacks.texts(chatId),
      buttons: async (chatId) => lastCallback(chatId)?.body.actions ?? [],
      async click(chatId, command, sender) {
        if (!lastCallback(chatId)?.body.actions?.some((a) => a.command === command)) throw new Error(`no action ${command} in the last callback for ${chatId}`);
        await post({ updateId: `click-${++clicks}`, chatId, sender, text: command });
      },
      close: () => callbacks.close(),
    };
  },
});
