/**
 * The LINE channel passes the channel contract (signed webhook deliveries
 * in, the real SDK's Messaging API calls out, against the fake LINE API). The
 * contract's chat is a one-to-one chat, whose LINE chat id is the sender's
 * user id, so the harness maps the contract's chat to its sender.
 */
import { createLinePlugin } from '../../plugins/line/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { type FakeLine, LINE_TEST, lineDelivery, lineTextEvent, postLineDelivery, startFakeLine, webhookEventId } from '../../testing/fakes/line-server.js';
import { redisUrl } from '../helpers/redis.js';

const eventIdOf = (m: ContractMessage) => `CONTRACT${m.updateId}`;

channelPluginContract({
  name: 'line',
  redisUrl: redisUrl(),
  // Buttons are quick replies: a tap sends the command as the person's own text message.
  capabilities: { typing: true, buttons: 'text' },
  makeHarness: async (env: ChannelContractEnv) => {
    const line: FakeLine = await startFakeLine();
    const plugin = createLinePlugin({ ...LINE_TEST, apiBaseURL: line.apiUrl }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    /** The sender of each contract chat: LINE's one-to-one chat is the user's id. */
    const senderOf = new Map<string, string>();
    const expected = (m: ContractMessage) => {
      senderOf.set(m.chatId, m.sender.id);
      return { updateKey: `line:${eventIdOf(m)}`, conversationId: `line:${m.sender.id}` };
    };
    const chatOf = (chatId: string) => senderOf.get(chatId) ?? chatId;
    /** Posts a signed delivery of one text message from `userId`. */
    const deliver = async (eventId: string, userId: string, text: string) => {
      const event = lineTextEvent({ webhookEventId: eventId, userId, text, replyToken: line.issueReplyToken(userId) });
      const res = await postLineDelivery(`${env.baseUrl()}/line/webhook`, lineDelivery(event));
      if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${JSON.stringify(res.body)}`);
    };
    return {
      plugin,
      async inject(m) {
        expected(m);
        await deliver(eventIdOf(m), m.sender.id, m.text);
      },
      expected,
      received: async (chatId) => line.sent.filter((s) => s.to === chatOf(chatId)).map((s) => s.text),
      typingCount: async (chatId) => line.loading.filter((c) => c === chatOf(chatId)).length,
      buttons: async (chatId) => (line.sent.findLast((s) => s.to === chatOf(chatId))?.quickReplies ?? []).map((q) => ({ label: q.label, command: q.text })),
      async click(chatId, command, sender) {
        const reply = line.sent.findLast((s) => s.to === chatOf(chatId))?.quickReplies?.find((q) => q.text === command);
        if (!reply) throw new Error(`no quick reply ${command} under the last message to ${chatId}`);
        await deliver(webhookEventId(), sender.id, reply.text);
      },
      close: () => line.close(),
    };
  },
});
