/**
 * The webhook channels' own Redis keys (plugin storage of `webhooks`): per
 * conversation the callback cursor, the sender's lock and the given-up count
 * (declared, so purge deletes and idle retention expires them); per channel
 * the conversations whose callbacks are due.
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys. */
export const WEBHOOK_PLUGIN_ID = 'webhooks';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const WEBHOOK_CONVERSATION_KEYS = ['callback_cursor', 'callback_lock', 'callback_given_up'] as const;

// One storage for the process's prefix, not one per key: the callback pump names keys on every pass.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, WEBHOOK_PLUGIN_ID)));

/** Conversations of the channel with replies not yet taken by the callback receiver, scored by when they are due (ms since the epoch; 0: now). */
export const pendingKey = (prefix: string, channelId: string): string => keys(prefix).key(`callbacks_due:${channelId}`);

/** Stream id of the last reply of the conversation the receiver took. */
export const cursorKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'callback_cursor');

/** The lock of the host sending the conversation's callbacks (holds its token). */
export const lockKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'callback_lock');

/** Replies of the conversation whose callback was given up (hash: `count`, `last_reply`, `at` ms), shown by the console as stuck. */
export const givenUpKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'callback_given_up');

/** Pub/sub channel on which a stored reply wakes the channel's callback pumps (the poll is the fallback when a wake-up is missed). */
export const wakeChannel = (prefix: string, channelId: string): string => keys(prefix).key(`callbacks_wake:${channelId}`);
