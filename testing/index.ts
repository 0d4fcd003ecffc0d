/**
 * steerbot's test kit (`steerbot/testing`), for plugin authors' vitest
 * suites: the runner-plugin and channel-plugin contract suites, the runner
 * harness they run on, and local fakes of the platforms (OpenAI-compatible
 * chat completions, Anthropic's Messages API, Google's Gemini API, Telegram Bot API, Discord REST + gateway, the WhatsApp Cloud API,
 * Slack Web API + Socket Mode, the LINE Messaging API, a Matrix homeserver, the Feishu / Lark open platform with its long connection,
 * Microsoft Teams (Entra keys and tokens + the Bot Connector),
 * a webhook callback receiver; real local IMAP and SMTP servers for email). Everything talks to a real Redis (`REDIS_URL`, else
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
export { type AnthropicTurn, type FakeAnthropicOptions, type FakeAnthropicServer, startFakeAnthropic } from './fakes/anthropic-server.js';
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
export {
  encryptCallback,
  FEISHU_ANN,
  FEISHU_BOB,
  FEISHU_BOT_OPEN_ID,
  FEISHU_DM,
  FEISHU_GROUP,
  FEISHU_TEST,
  type FeishuMessageOptions,
  feishuCardAction,
  feishuId,
  feishuMessageEvent,
  feishuSignedHeaders,
  type PostCallbackOptions,
  postFeishuCallback,
} from './fakes/feishu-events.js';
export { decodeFrame, encodeFrame, type FeishuFrame } from './fakes/feishu-frame.js';
export {
  type FakeFeishu,
  type FakeFeishuOptions,
  type FeishuAck,
  type FeishuCall,
  type FeishuFailure,
  type FeishuSentMessage,
  startFakeFeishu,
} from './fakes/feishu-server.js';
export { type FakeGoogleOptions, type FakeGoogleServer, type GoogleTurn, startFakeGoogle } from './fakes/google-server.js';
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
export { type MatrixMedia, MatrixMediaStore, type MediaAnswer, type MediaRoute } from './fakes/matrix-media.js';
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
export type { ModelRequest, ScriptedModelServer } from './fakes/scripted-model.js';
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
export {
  type FakeTeams,
  startFakeTeams,
  TEAMS_ALICE,
  TEAMS_BOB,
  TEAMS_TEST,
  type TeamsActivityOptions,
  type TeamsCall,
  type TeamsCallKind,
  type TeamsFailure,
  type TeamsSentActivity,
  type TeamsTokenOptions,
  teamsActivityId,
  teamsMessageActivity,
} from './fakes/teams-server.js';
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
