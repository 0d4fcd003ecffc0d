/**
 * The Teams channel passes the channel contract (activities POSTed with a
 * Bot Service token signed by the fake's key; messages,
 * updates, typing and Adaptive Card buttons out through the SDK's connector
 * client, against the fake Bot Connector; files by signed URL, fetched back
 * from the host that serves them). Each contract chat is a personal
 * conversation `a:contract<chat id>`.
 */
import { createTeamsPlugin } from '../../plugins/teams/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import { startFakeTeams } from '../../testing/fakes/teams-server.js';
import { redisUrl } from '../helpers/redis.js';
import { postActivity, teamsTestConfig } from './teams-harness.js';

const conversationOf = (chatId: string) => `a:contract${chatId}`;
const activityIdOf = (m: ContractMessage) => `1${m.updateId}`;
/** Where the signed file URLs say the host is; the harness fetches their path from the local host. */
const FILES_URL = 'https://bot.example.test';

channelPluginContract({
  name: 'teams',
  redisUrl: redisUrl(),
  capabilities: { typing: true, edit: true, buttons: 'interaction', files: true },
  makeHarness: async (env: ChannelContractEnv) => {
    const teams = await startFakeTeams();
    const plugin = createTeamsPlugin({ ...teamsTestConfig(teams), filesUrl: FILES_URL }, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    const post = async (activity: Record<string, unknown>) => {
      const res = await postActivity(teams, `${env.baseUrl()}/api/messages`, activity);
      if (res.status !== 200) throw new Error(`messaging endpoint answered ${res.status}: ${JSON.stringify(res.body)}`);
    };
    const lastCard = (chatId: string) => teams.sent.findLast((s) => s.conversationId === conversationOf(chatId) && s.type === 'message');
    return {
      plugin,
      inject: (m) => post(teams.message({ id: activityIdOf(m), conversationId: conversationOf(m.chatId), from: m.sender, text: m.text })),
      expected: (m) => ({ updateKey: `teams:${conversationOf(m.chatId)}:${activityIdOf(m)}`, conversationId: `teams:${conversationOf(m.chatId)}` }),
      received: async (chatId) => teams.texts(conversationOf(chatId)),
      typingCount: async (chatId) => teams.typingCount(conversationOf(chatId)),
      buttons: async (chatId) => (lastCard(chatId)?.buttons ?? []).map((b) => ({ label: b.title, command: (b.data as { steerbot: string }).steerbot })),
      async click(chatId, command, sender) {
        const card = lastCard(chatId);
        const button = card?.buttons.find((b) => (b.data as { steerbot?: string }).steerbot === command);
        if (!card || !button) throw new Error(`no button ${command} under the last message to ${chatId}`);
        await post(teams.message({ conversationId: conversationOf(chatId), from: sender, value: button.data, replyToId: card.id }));
      },
      files: async (chatId) =>
        Promise.all(
          teams.files(conversationOf(chatId)).map(async (f) => {
            const u = new URL(f.url);
            if (u.origin !== FILES_URL) throw new Error(`a file URL outside filesUrl: ${f.url}`);
            const res = await fetch(`${env.baseUrl()}${u.pathname}${u.search}`);
            if (res.status !== 200) throw new Error(`${f.url} answered ${res.status}`);
            return { name: f.name, bytes: new Uint8Array(await res.arrayBuffer()) };
          }),
        ),
      close: () => teams.close(),
    };
  },
});
