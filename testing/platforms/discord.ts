/** `steerbot/testing`'s `discord`: the fake of Discord REST and gateway. */
export type { FakeGuild, InteractionResponse, StoredMessage, UploadedFile as DiscordUploadedFile } from '../fakes/discord-server.js';
export {
  FakeDiscord,
  type FakeDiscordOptions,
  type FakeUser,
  type MessageInput,
  type RestCall,
  snowflake,
  startFakeDiscord,
  user,
} from '../fakes/discord-server.js';
