/**
 * The WhatsApp channel passes the channel contract (signed webhook
 * deliveries in, Graph API calls out, against the fake Cloud API). A
 * WhatsApp chat is the sender's number, so the harness maps the contract's
 * chat to its sender.
 */
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import { lastInboundKey } from '../../plugins/whatsapp/keys.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { redisUrl } from '../helpers/redis.js';

const wamidOf = (m: ContractMessage) => `wamid.contract${m.updateId}`;

channelPluginContract({
  name: 'whatsapp',
  redisUrl: redisUrl(),
  capabilities: { typing: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const wa: FakeWhatsApp = await startFakeWhatsApp();
    const plugin = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    /** The sender of each contract chat: WhatsApp's chat with a user is that user's number. */
    const senderOf = new Map<string, string>();
    const expected = (m: ContractMessage) => {
      senderOf.set(m.chatId, m.sender.id);
      return { updateKey: `whatsapp:${wamidOf(m)}`, conversationId: `whatsapp:${m.sender.id}` };
    };
    // The typing indicator names the user's newest message; the contract asks for it before any arrived.
    await env.redis.set(lastInboundKey(env.prefix, 'whatsapp:777'), 'wamid.seeded');
    return {
      plugin,
      async inject(m) {
        expected(m);
        const payload = messageDelivery({ id: wamidOf(m), from: { waId: m.sender.id, name: m.sender.name }, text: m.text });
        const res = await postDelivery(`${env.baseUrl()}/whatsapp/webhook`, payload);
        if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${JSON.stringify(res.body)}`);
      },
      expected,
      received: async (chatId) => wa.sent.filter((s) => s.to === (senderOf.get(chatId) ?? chatId)).map((s) => s.text),
      typingCount: async () => wa.reads.filter((r) => r.typing).length,
      close: () => wa.close(),
    };
  },
});
