/** The Discord channel passes the channel contract (real discord.js client against the fake Discord gateway + REST). */
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { FakeDiscord, user } from '../../testing/fakes/discord-server.js';
import { redisUrl } from '../helpers/redis.js';
import { TOKEN } from './discord-harness.js';

channelPluginContract({
  name: 'discord',
  redisUrl: redisUrl(),
  capabilities: { typing: true, edit: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const fake = await FakeDiscord.start({ token: TOKEN });
    const plugin = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    return {
      plugin,
      // A DM: the gateway delivers it to the client as a MESSAGE_CREATE (delivering it again is a gateway replay).
      async inject(m: ContractMessage) {
        fake.messageCreate({ id: m.updateId, channelId: m.chatId, author: user(m.sender.id, m.sender.name), content: m.text });
      },
      expected: (m: ContractMessage) => ({ updateKey: `discord:${m.updateId}`, conversationId: `discord:${m.chatId}` }),
      received: async (chatId: string) => [...fake.messages.values()].filter((x) => x.channel_id === chatId).map((x) => x.content),
      typingCount: async (chatId: string) => fake.callsTo('POST', new RegExp(`^/channels/${chatId}/typing$`)).length,
      close: () => fake.close(),
    };
  },
});
