/** The Discord channel passes the channel contract (real discord.js client against the fake Discord gateway + REST). */
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { FakeDiscord, user } from '../../testing/fakes/discord-server.js';
import { redisUrl } from '../helpers/redis.js';
import { TOKEN } from './discord-harness.js';

/** Buttons of a message's components: its action rows, flattened. */
const buttonsOf = (components: any[] | undefined) =>
  (components ?? []).flatMap((row: { components?: Array<{ label: string; custom_id: string }> }) =>
    (row.components ?? []).map((b) => ({ label: b.label, command: b.custom_id })),
  );

channelPluginContract({
  name: 'discord',
  redisUrl: redisUrl(),
  // The plugin's default status reactions (`reactions: true`); a click is a component interaction.
  capabilities: { typing: true, edit: true, reactions: { taken: '👀', answered: '✅', failed: '❌' }, buttons: 'interaction', files: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const fake = await FakeDiscord.start({ token: TOKEN });
    const plugin = createDiscordPlugin({ token: TOKEN, apiBase: fake.apiBase, reactions: true }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    const lastSent = (chatId: string) => [...fake.messages.values()].findLast((x) => x.channel_id === chatId && x.authorId === fake.bot.id);
    return {
      plugin,
      // A DM: the gateway delivers it to the client as a MESSAGE_CREATE (delivering it again is a gateway replay).
      async inject(m: ContractMessage) {
        fake.messageCreate({ id: m.updateId, channelId: m.chatId, author: user(m.sender.id, m.sender.name), content: m.text });
      },
      expected: (m: ContractMessage) => ({ updateKey: `discord:${m.updateId}`, conversationId: `discord:${m.chatId}` }),
      received: async (chatId: string) => [...fake.messages.values()].filter((x) => x.channel_id === chatId).map((x) => x.content),
      typingCount: async (chatId: string) => fake.callsTo('POST', new RegExp(`^/channels/${chatId}/typing$`)).length,
      reactions: async (chatId: string, messageId: string) => [...(fake.reactions.get(`${chatId}:${messageId}`) ?? [])],
      files: async (chatId: string) =>
        [...fake.messages.values()].filter((x) => x.channel_id === chatId).flatMap((x) => (x.files ?? []).map((f) => ({ name: f.filename, bytes: f.data }))),
      buttons: async (chatId: string) => buttonsOf(lastSent(chatId)?.components),
      async click(chatId: string, command: string, sender: ContractMessage['sender']) {
        const message = lastSent(chatId);
        if (!message) throw new Error(`the bot sent nothing to channel ${chatId}`);
        fake.buttonClick({ messageId: message.id, customId: command, user: user(sender.id, sender.name) });
      },
      close: () => fake.close(),
    };
  },
});
