/**
 * steerbot's test kit (`steerbot/testing`), for plugin authors' vitest
 * suites: the runner-plugin and channel-plugin contract suites, the runner
 * harness they run on, and local fakes of the platforms (OpenAI-compatible
 * chat completions, Telegram Bot API, Discord REST + gateway, the WhatsApp Cloud API,
 * Slack Web API + Socket Mode, the LINE Messaging API, a Matrix homeserver, a webhook callback receiver; real local IMAP and SMTP servers for email). Everything talks to a real Redis (`REDIS_URL`, else
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
export type { FakeGuild, InteractionResponse, StoredMessage, UploadedFile as DiscordUploadedFile } from './fakes/discord-server.js';
export {
  FakeDiscord,
  type FakeDiscordOptions,
  type FakeUser,
  type MessageInput,
  type RestCall,
  snowflake,
  startFakeDiscord,
  user,
} from './fakes/discord-server.js';
export type { HeldAnswer } from './fakes/held-answers.js';
export {
  type FakeLine,
  type FakeLineOptions,
  LINE_ALICE,
  LINE_GROUP,
  LINE_TEST,
  type LineCall,
  type LineFailure,
  type LineSentMessage,
  type LineTextEventOptions,
  lineDelivery,
  lineTextEvent,
  postLineDelivery,
  signLineDelivery,
  startFakeLine,
  webhookEventId,
} from './fakes/line-server.js';
export { MAIL_DOMAIN, type MailServers, type MailUser, startMailServers } from './fakes/mail-servers.js';
export {
  FakeMatrix,
  type FakeMatrixOptions,
  MATRIX_ALICE,
  MATRIX_BOB,
  MATRIX_TEST,
  type MatrixCall,
  type MatrixCallKind,
  type MatrixEvent,
  type MatrixFailure,
  type MatrixMessageOptions,
  startFakeMatrix,
} from './fakes/matrix-server.js';
export type { FakeOpenAIOptions } from './fakes/openai-server.js';
export { type FakeOpenAIServer, type FakeRequest, type FakeTurn, startFakeOpenAI } from './fakes/openai-server.js';
export {
  blockActions as slackBlockActions,
  eventCallback as slackEventCallback,
  FakeSlack,
  type FakeSlackOptions,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_BOT_USER,
  SLACK_SIGNING_SECRET,
  type SlackApiCall,
  type SlackFailure,
  type SlackFakeFile,
  type SlackMessageInput,
  type SlackPostedMessage,
  type SlackUploadedFile,
  signedSlackHeaders,
  startFakeSlack,
} from './fakes/slack-server.js';
export type { ScriptedFailure, SentFile as TelegramSentFile, SentMessage as TelegramSentMessage } from './fakes/telegram-server.js';
export {
  ALICE,
  type ApiCall,
  FAKE_TOKEN,
  type FakeTelegram,
  type FakeTelegramOptions,
  type MessageUpdateOptions,
  messageUpdate,
  startFakeTelegram,
  type TgUser,
} from './fakes/telegram-server.js';
export { type CallbackServer, type ReceivedCallback, startCallbackServer } from './fakes/webhook-callback-server.js';
export {
  delivery as whatsappDelivery,
  type FakeWhatsApp,
  type FakeWhatsAppOptions,
  type GraphCall,
  type GraphFailure,
  messageDelivery,
  postDelivery,
  signDelivery,
  startFakeWhatsApp,
  statusDelivery,
  WA_ALICE,
  type WaMessageOptions,
  WHATSAPP_TEST,
  type WhatsAppSentMessage,
  wamid,
} from './fakes/whatsapp-server.js';
export { cleanupPrefix, defaultRedisUrl, testPrefix } from './redis.js';
export { type Invocation, PluginProbe, type RunnerContractEnv, type RunnerContractOptions, runnerPluginContract } from './runner-contract.js';
export { CID, deferred, type HarnessOptions, type HarnessRunner, RecordingOutbound, RunnerHarness, type SentMessage } from './runner-harness.js';
export { waitFor } from './wait.js';
