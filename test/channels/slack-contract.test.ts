/** The Slack channel passes the channel contract, over Socket Mode and over the Events API (the real Slack clients against the fake Slack). */
import { createSlackPlugin, type SlackConfigInput } from '../../plugins/slack/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import {
  eventCallback,
  type FakeSlack,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_SIGNING_SECRET,
  signedSlackHeaders,
  startFakeSlack,
} from '../../testing/fakes/slack-server.js';
import { redisUrl } from '../helpers/redis.js';

const event = (m: ContractMessage) => eventCallback({ channel: m.chatId, ts: `${m.updateId}.000100`, user: m.sender.id, text: m.text, channelType: 'im' });

function harnessFor(mode: 'socket' | 'events') {
  return async (env: ChannelContractEnv) => {
    const slack: FakeSlack = await startFakeSlack();
    const config: SlackConfigInput =
      mode === 'socket'
        ? { botToken: SLACK_BOT_TOKEN, appToken: SLACK_APP_TOKEN, apiUrl: slack.apiUrl }
        : { botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: slack.apiUrl };
    const plugin = createSlackPlugin(config, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    return {
      plugin,
      async inject(m: ContractMessage) {
        if (mode === 'socket') {
          slack.deliver('events_api', event(m));
          return;
        }
        const body = JSON.stringify(event(m));
        const res = await fetch(`${env.baseUrl()}/slack/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...signedSlackHeaders(body) },
          body,
        });
        if (res.status !== 200) throw new Error(`events route answered ${res.status}: ${await res.text()}`);
      },
      expected: (m: ContractMessage) => ({ updateKey: `slack:${m.chatId}:${m.updateId}.000100`, conversationId: `slack:${m.chatId}` }),
      received: async (chatId: string) => slack.textsIn(chatId),
      close: () => slack.close(),
    };
  };
}

channelPluginContract({ name: 'slack (socket mode)', redisUrl: redisUrl(), makeHarness: harnessFor('socket'), capabilities: { edit: true } });
channelPluginContract({ name: 'slack (events api)', redisUrl: redisUrl(), makeHarness: harnessFor('events'), capabilities: { edit: true } });
