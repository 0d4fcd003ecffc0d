/**
 * The WhatsApp channel passes the channel contract (signed webhook
 * deliveries in, Graph API calls out, against the fake Cloud API). A
 * WhatsApp chat is the sender's number, so the harness maps the contract's
 * chat to its sender.
 */
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import { lastInboundKey } from '../../plugins/whatsapp/keys.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WHATSAPP_TEST, wamid } from '../../testing/fakes/whatsapp-server.js';
import { redisUrl } from '../helpers/redis.js';

const wamidOf = (m: ContractMessage) => `wamid.contract${m.updateId}`;

channelPluginContract({
  name: 'whatsapp',
  redisUrl: redisUrl(),
  // The plugin's default status reactions (`reactions: true`); a click is an interactive button reply.
  capabilities: { typing: true, reactions: { taken: '👀', answered: '✅', failed: '❌' }, buttons: 'interaction', files: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const wa: FakeWhatsApp = await startFakeWhatsApp();
    const plugin = createWhatsAppPlugin(
      { ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl, reactions: true },
      { logger: env.logger, redis: env.redis, prefix: env.prefix },
    );
    /** The sender of each contract chat: WhatsApp's chat with a user is that user's number. */
    const senderOf = new Map<string, string>();
    const expected = (m: ContractMessage) => {
      senderOf.set(m.chatId, m.sender.id);
      return { updateKey: `whatsapp:${wamidOf(m)}`, conversationId: `whatsapp:${m.sender.id}` };
    };
    const chatOf = (chatId: string) => senderOf.get(chatId) ?? chatId;
    /** Posts one signed delivery to the webhook route. */
    const deliver = async (payload: Record<string, unknown>) => {
      const res = await postDelivery(`${env.baseUrl()}/whatsapp/webhook`, payload);
      if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${JSON.stringify(res.body)}`);
    };
    // The typing indicator names the user's newest message; the contract asks for it before any arrived.
    await env.redis.set(lastInboundKey(env.prefix, 'whatsapp:777'), 'wamid.seeded');
    return {
      plugin,
      async inject(m) {
        expected(m);
        await deliver(messageDelivery({ id: wamidOf(m), from: { waId: m.sender.id, name: m.sender.name }, text: m.text }));
      },
      expected,
      received: async (chatId) => wa.sent.filter((s) => s.to === chatOf(chatId)).map((s) => s.text),
      files: async (chatId) => wa.sent.filter((s) => s.to === chatOf(chatId) && s.media).map((s) => ({ name: s.media!.filename ?? '', bytes: s.media!.data })),
      typingCount: async () => wa.reads.filter((r) => r.typing).length,
      reactions: async (_chatId, messageId) => {
        const emoji = wa.reactions.get(messageId);
        return emoji ? [emoji] : [];
      },
      buttons: async (chatId) => (wa.sent.findLast((s) => s.to === chatOf(chatId))?.buttons ?? []).map((b) => ({ label: b.title, command: b.id })),
      // An interactive message from the clicker: the reply button's id is its command.
      async click(chatId, command, sender) {
        const button = wa.sent.findLast((s) => s.to === chatOf(chatId))?.buttons?.find((b) => b.id === command);
        if (!button) throw new Error(`no button ${command} under the last message to ${chatId}`);
        await deliver(messageDelivery({ id: wamid(), from: { waId: sender.id, name: sender.name }, buttonReply: button }));
      },
      close: () => wa.close(),
    };
  },
});
