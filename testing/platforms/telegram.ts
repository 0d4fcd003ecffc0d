/** `steerbot/testing`'s `telegram`: the fake of the Telegram Bot API. */
export type { ScriptedFailure, SentFile as TelegramSentFile, SentMessage as TelegramSentMessage } from '../fakes/telegram-server.js';
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
} from '../fakes/telegram-server.js';
