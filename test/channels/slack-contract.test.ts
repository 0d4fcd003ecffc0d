/** The Slack channel passes the channel contract, over Socket Mode and over the Events API (the real Slack clients against the fake Slack). */
import { createSlackPlugin, type SlackConfigInput } from '../../plugins/slack/channel.js';
import { type ChannelContractEnv, type ContractMessage, channelPluginContract } from '../../testing/channel-contract.js';
import {
  blockActions,
  eventCallback,
  type FakeSlack,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_SIGNING_SECRET,
  signedSlackHeaders,
  startFakeSlack,
} from '../../testing/fakes/slack-server.js';
import { redisUrl } from '../helpers/redis.js';

/** The buttons of a message's actions blocks. */
const buttonsOf = (blocks: any[] | undefined) =>
  (blocks ?? [])
    .filter((b: { type: string }) => b.type === 'actions')
    .flatMap((b: { elements: Array<{ text: { text: string }; value: string }> }) => b.elements.map((e) => ({ label: e.text.text, command: e.value })));

/** The plugin's default status reactions (`reactions: true`), by Slack's emoji names. */
const REACTIONS = { taken: 'eyes', answered: 'white_check_mark', failed: 'x' };

const event = (m: ContractMessage) => eventCallback({ channel: m.chatId, ts: `${m.updateId}.000100`, user: m.sender.id, text: m.text, channelType: 'im' });

function harnessFor(mode: 'socket' | 'events') {
  return async (env: ChannelContractEnv) => {
    const slack: FakeSlack = await startFakeSlack();
    const config: SlackConfigInput =
      mode === 'socket'
        ? { botToken: SLACK_BOT_TOKEN, appToken: SLACK_APP_TOKEN, apiUrl: slack.apiUrl, reactions: true }
        : { botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: slack.apiUrl, reactions: true };
    const plugin = createSlackPlugin(config, { logger: env.logger, redis: env.redis, prefix: env.prefix });
    /** Sends a signed request to one of the plugin's routes (events mode). */
    const post = async (path: string, contentType: string, body: string) => {
      const res = await fetch(`${env.baseUrl()}${path}`, { method: 'POST', headers: { 'content-type': contentType, ...signedSlackHeaders(body) }, body });
      if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
    };
    const lastSent = (chatId: string) => slack.messages.findLast((x) => x.channel === chatId && !x.author);
    return {
      plugin,
      async inject(m: ContractMessage) {
        if (mode === 'socket') slack.deliver('events_api', event(m));
        else await post('/slack/events', 'application/json', JSON.stringify(event(m)));
      },
      expected: (m: ContractMessage) => ({ updateKey: `slack:${m.chatId}:${m.updateId}.000100`, conversationId: `slack:${m.chatId}` }),
      received: async (chatId: string) => slack.textsIn(chatId),
      reactions: async (chatId: string, messageId: string) => [...(slack.reactions.get(`${chatId}:${messageId}`) ?? [])],
      files: async (chatId: string) => slack.uploads.filter((u) => u.channel === chatId).map((u) => ({ name: u.filename, bytes: u.bytes })),
      buttons: async (chatId: string) => buttonsOf(lastSent(chatId)?.blocks),
      // A `block_actions` interaction: over the socket, or a signed form POST to the interactivity route.
      async click(chatId: string, command: string, sender: ContractMessage['sender']) {
        const message = lastSent(chatId);
        if (!message) throw new Error(`the bot posted nothing in ${chatId}`);
        const payload = blockActions(message, command, sender.id);
        if (mode === 'socket') slack.deliver('interactive', payload);
        else await post('/slack/interactivity', 'application/x-www-form-urlencoded', new URLSearchParams({ payload: JSON.stringify(payload) }).toString());
      },
      close: () => slack.close(),
    };
  };
}

const capabilities = { edit: true, reactions: REACTIONS, buttons: 'interaction', files: true } as const;
channelPluginContract({ name: 'slack (socket mode)', redisUrl: redisUrl(), makeHarness: harnessFor('socket'), capabilities });
channelPluginContract({ name: 'slack (events api)', redisUrl: redisUrl(), makeHarness: harnessFor('events'), capabilities });
