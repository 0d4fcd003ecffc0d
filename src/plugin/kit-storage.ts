/**
 * The plugin kit's storage internals (`storage` in `steerbot/plugin`), for a
 * plugin that keeps state of its own in Redis: its own keys
 * (`pluginStorage`), its own Lua scripts (`defineScript`), one holder among
 * processes (`RedisLease`, `LeasedPoll`), the reply-stream contract
 * (`storeReply`, `replyStreamKey`), blocking stream readers and the mapping
 * of a connection failure to `RedisUnavailableError` (`redisCall`, `asRedisUnavailable`). One namespace: a
 * plugin that needs one of these usually needs several (docs/plugins.md,
 * "Storage").
 */

export { BlockingReaders, blockingConnection, type ReaderPlace, type XreadReply } from '../http/stream-readers.js';
export { asRedisUnavailable, redisCall } from '../redis/connection.js';
export { type LeaseState, RedisLease } from '../redis/lease.js';
export { LeasedPoll, type LeasedPollOptions } from '../redis/leased-poll.js';
export { replyStreamKey, type StoreReplyOptions, type StoreReplyResult, storeReply } from '../reply-stream.js';
export type { ScriptReply } from '../scripts/index.js';
export { defineScript, type PluginScript } from '../scripts/plugin-script.js';
export { type CoreConversationKeys, PluginStorage, type PluginStorageDeclaration, pluginStorage } from './storage.js';
