/**
 * The Feishu / Lark channel passes the channel contract (events and card
 * clicks in over the real SDK's long connection, messages and cards out
 * through the real SDK's client, against the fake open platform), status
 * reactions by the plugin's default emoji types (`reactions: true`) and
 * files uploaded natively. The contract's digit ids are used as chat ids and
 * open ids as they are.
 */
import { createFeishuPlugin } from '../../plugins/feishu/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { FEISHU_TEST, feishuCardAction, feishuMessageEvent } from '../../testing/fakes/feishu-events.js';
import { startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { redisUrl } from '../helpers/redis.js';

const messageIdOf = (m: ContractMessage) => `om_contract${m.updateId}`;

channelPluginContract({
  name: 'feishu',
  redisUrl: redisUrl(),
  capabilities: { buttons: 'interaction', reactions: { taken: 'OnIt', answered: 'DONE', failed: 'CrossMark' }, files: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const feishu = await startFakeFeishu();
    const plugin = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url, reactions: true }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    const lastTo = (chatId: string) => feishu.sent.findLast((s) => s.chatId === chatId);
    return {
      plugin,
      async inject(m) {
        const ack = await feishu.push(feishuMessageEvent({ text: m.text, chatId: m.chatId, sender: m.sender.id, messageId: messageIdOf(m) }));
        if (ack.code !== 200) throw new Error(`the event was acknowledged with ${ack.code}`);
      },
      expected: (m) => ({ updateKey: `feishu:${messageIdOf(m)}`, conversationId: `feishu:${m.chatId}` }),
      received: async (chatId) => feishu.sent.filter((s) => s.chatId === chatId && s.media === undefined).map((s) => s.text),
      reactions: async (_chatId, messageId) => feishu.reactionsOn(messageId),
      files: async (chatId) => feishu.sent.flatMap((s) => (s.chatId === chatId && s.media ? [{ name: s.media.fileName ?? 'image', bytes: s.media.data }] : [])),
      buttons: async (chatId) => (lastTo(chatId)?.buttons ?? []).map((b) => ({ label: b.label, command: b.value.command })),
      async click(chatId, command, sender) {
        const card = lastTo(chatId);
        const button = card?.buttons.find((b) => b.value.command === command);
        if (!card || !button) throw new Error(`no button ${command} on the last card in ${chatId}`);
        await feishu.push(feishuCardAction({ messageId: card.id, chatId, operator: sender.id, value: button.value }));
      },
      close: () => feishu.close(),
    };
  },
});
