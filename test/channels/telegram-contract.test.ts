/** The Telegram channel passes the channel contract, in webhook mode and in long-polling mode (real grammY against the fake Bot API). */
import { createTelegramPlugin, type TelegramConfigInput } from '../../plugins/telegram/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
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

function harnessFor(mode: 'webhook' | 'polling') {
  return async (env: ChannelContractEnv) => {
    const tg: FakeTelegram = await startFakeTelegram();
    const config: TelegramConfigInput =
      mode === 'webhook'
        ? { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode, webhookSecret: SECRET }
        : { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode, pollingLeaseMs: 1000, pollTimeoutSeconds: 1 };
    const plugin = createTelegramPlugin(config, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    return {
      plugin,
      async inject(m: ContractMessage) {
        if (mode === 'polling') {
          tg.pushUpdate(update(m));
          return;
        }
        const res = await fetch(`${env.baseUrl()}/telegram/webhook`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': SECRET },
          body: JSON.stringify(update(m)),
        });
        if (res.status !== 200) throw new Error(`webhook answered ${res.status}: ${await res.text()}`);
      },
      expected: (m: ContractMessage) => ({ updateKey: `telegram:${m.updateId}`, conversationId: `telegram:${m.chatId}` }),
      received: async (chatId: string) => tg.sent.filter((s) => String(s.chatId) === chatId).map((s) => s.text),
      typingCount: async (chatId: string) => tg.callsOf('sendChatAction').filter((c) => String(c.payload.chat_id) === chatId).length,
      close: () => tg.close(),
    };
  };
}

channelPluginContract({ name: 'telegram (webhook)', redisUrl: redisUrl(), makeHarness: harnessFor('webhook'), capabilities: { typing: true, edit: true } });
channelPluginContract({ name: 'telegram (polling)', redisUrl: redisUrl(), makeHarness: harnessFor('polling'), capabilities: { typing: true, edit: true } });
