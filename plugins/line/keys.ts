/**
 * The LINE channel's own Redis keys (plugin storage of `line`), per
 * conversation: the reply token of the newest event (a reply uses it once,
 * within about a minute). Declared in the definition, so `/purge` deletes it
 * and idle retention expires it with the conversation.
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys. */
export const LINE_PLUGIN_ID = 'line';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const LINE_CONVERSATION_KEYS = ['reply_token'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, LINE_PLUGIN_ID)));

/** The newest event's reply token: a string `<event time, ms>:<token>`, expiring with LINE's one-minute validity. */
export const replyTokenKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reply_token');
