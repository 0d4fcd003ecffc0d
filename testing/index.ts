/**
 * steerbot's test kit (`steerbot/testing`), for plugin authors' vitest
 * suites: the runner-plugin and channel-plugin contract suites, the runner
 * harness they run on, and local fakes of the platforms (OpenAI-compatible
 * chat completions, Telegram Bot API, Discord REST + gateway, a webhook
 * callback receiver). Everything talks to a real Redis (`REDIS_URL`, else
 * `redis://127.0.0.1:6379`, or the `redisUrl` option) under a random key
 * prefix it deletes after each test.
 */
export {
  channelPluginContract,
  type ChannelContractEnv,
  type ChannelContractOptions,
  type ChannelHarness,
  type ContractMessage,
  type MakeHarness,
} from './channel-contract.js';
export { type Invocation, PluginProbe, runnerPluginContract, type RunnerContractEnv, type RunnerContractOptions } from './runner-contract.js';
export { CID, deferred, type HarnessOptions, RecordingOutbound, RunnerHarness, type SentMessage } from './runner-harness.js';
export { ingestOnlyHost, type IngestOnlyHostOptions } from './channel-host.js';
export { cleanupPrefix, defaultRedisUrl, testPrefix } from './redis.js';
export { waitFor } from './wait.js';
export { startFakeOpenAI, type FakeOpenAIServer, type FakeRequest, type FakeTurn } from './fakes/openai-server.js';
export {
  ALICE,
  FAKE_TOKEN,
  messageUpdate,
  startFakeTelegram,
  type ApiCall,
  type FakeTelegram,
  type FakeTelegramOptions,
  type MessageUpdateOptions,
  type TgUser,
} from './fakes/telegram-server.js';
export { FakeDiscord, type FakeDiscordOptions, type FakeUser, type MessageInput, type RestCall, snowflake, startFakeDiscord, user } from './fakes/discord-server.js';
export { type CallbackServer, type ReceivedCallback, startCallbackServer } from './fakes/webhook-callback-server.js';
