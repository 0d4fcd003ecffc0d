/**
 * steerbot's test kit (`steerbot/testing`), for plugin authors' vitest
 * suites: the runner-plugin and channel-plugin contract suites, the runner
 * harness they run on, `waitFor`, and one namespace per platform fake
 * (`telegram.startFakeTelegram()`, `openai.startFakeOpenAI()`, …): the model
 * providers (`openai`, `anthropic`, `google`), the chat platforms (`telegram`,
 * `discord`, `slack`, `whatsapp`, `line`, `matrix`, `feishu`, `teams`), real
 * local mail servers (`email`) and a webhook callback receiver (`webhook`).
 * Everything talks to a real Redis (`REDIS_URL`, else
 * `redis://127.0.0.1:6379`, or the `redisUrl` option) under a random key
 * prefix it deletes after each test.
 */

export {
  type ChannelCapabilities,
  type ChannelContractEnv,
  type ChannelContractOptions,
  type ChannelHarness,
  type ContractMessage,
  channelPluginContract,
  type MakeHarness,
} from './channel-contract.js';
export { type IngestOnlyHost, type IngestOnlyHostOptions, ingestOnlyHost } from './channel-host.js';
export type { HeldAnswer } from './fakes/held-answers.js';
export type { ModelRequest, ScriptedModelServer } from './fakes/scripted-model.js';
export type { HeldDownloads } from './fakes/telegram-server.js';
export * as anthropic from './platforms/anthropic.js';
export * as discord from './platforms/discord.js';
export * as email from './platforms/email.js';
export * as feishu from './platforms/feishu.js';
export * as google from './platforms/google.js';
export * as line from './platforms/line.js';
export * as matrix from './platforms/matrix.js';
export * as openai from './platforms/openai.js';
export * as slack from './platforms/slack.js';
export * as teams from './platforms/teams.js';
export * as telegram from './platforms/telegram.js';
export * as webhook from './platforms/webhook.js';
export * as whatsapp from './platforms/whatsapp.js';
export { cleanupPrefix, defaultRedisUrl, testPrefix } from './redis.js';
export { type Invocation, PluginProbe, type RunnerContractEnv, type RunnerContractOptions, runnerPluginContract } from './runner-contract.js';
export { CID, deferred, type HarnessOptions, type HarnessRunner, RecordingOutbound, RunnerHarness, type SentMessage } from './runner-harness.js';
export { waitFor } from './wait.js';
