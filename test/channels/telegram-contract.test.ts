/** The Telegram channel passes the channel contract, in webhook mode and in long-polling mode (real grammY against the fake Bot API). */
import { createTelegramPlugin, type TelegramConfigInput } from '../../plugins/telegram/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { callbackQueryUpdate, FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { redisUrl } from '../helpers/redis.js';

const SECRET = 'contract_secret_0123456789';

function update(m: ContractMessage): Record<string, unknown> {
  return messageUpdate({
    updateId: Number(m.updateId),
    chatId: Number(m.chatId),
    chatType: 'private',
    from: { id: Number(m.sender.id), is_bot: false, first_name: m.sender.name },
    text: m.text,
  });
}

/** The plugin's default status reactions (`reactions: true`). */
const REACTIONS = { taken: '👀', answered: '👍', failed: '😢' };

function harnessFor(mode: 'webhook' | 'polling') {
  return async (env: ChannelContractEnv) => {
    const tg: FakeTelegram = await startFakeTelegram();
    const config: TelegramConfigInput =
      mode === 'webhook'
        ? { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode, webhookSecret: SECRET, reactions: true }
        : { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode, pollingLeaseMs: 1000, pollTimeoutSeconds: 1, reactions: true };
    const deliver = async (u: Record<string, unknown>) => {
      if (mode === 'polling') {
        tg.pushUpdate(u);
        return;
      }
      const res = await fetch(`${env.baseUrl()}/telegram/webhook`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': SECRET },
        body: JSON.stringify(u),
      });
      if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
    };
    const lastSent = (chatId: string) => tg.sent.findLast((s) => String(s.chatId) === chatId);
    const plugin = createTelegramPlugin(config, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    return {
      plugin,
      inject: (m: ContractMessage) => deliver(update(m)),
      expected: (m: ContractMessage) => ({ updateKey: `telegram:${m.updateId}`, conversationId: `telegram:${m.chatId}` }),
      received: async (chatId: string) => tg.sent.filter((s) => String(s.chatId) === chatId).map((s) => s.text),
      typingCount: async (chatId: string) => tg.callsOf('sendChatAction').filter((c) => String(c.payload.chat_id) === chatId).length,
      reactions: async (chatId: string, messageId: string) => tg.reactions.get(`${chatId}:${messageId}`) ?? [],
      files: async (chatId: string) => tg.sentFiles.filter((f) => String(f.chatId) === chatId).map((f) => ({ name: f.name, bytes: f.bytes })),
      buttons: async (chatId: string) => (lastSent(chatId)?.buttons ?? []).map((b) => ({ label: b.text, command: b.data })),
      // A callback query from the clicker, carrying the button's data, under the bot's last message there.
      async click(chatId: string, command: string, sender: ContractMessage['sender']) {
        const message = lastSent(chatId);
        if (!message) throw new Error(`the bot sent nothing to chat ${chatId}`);
        await deliver(callbackQueryUpdate({ data: command, message, from: { id: Number(sender.id), is_bot: false, first_name: sender.name } }));
      },
      close: () => tg.close(),
    };
  };
}

const capabilities = { typing: true, edit: true, reactions: REACTIONS, buttons: 'interaction', files: true } as const;
channelPluginContract({ name: 'telegram (webhook)', redisUrl: redisUrl(), makeHarness: harnessFor('webhook'), capabilities });
channelPluginContract({ name: 'telegram (polling)', redisUrl: redisUrl(), makeHarness: harnessFor('polling'), capabilities });
