/**
 * The Feishu / Lark channel's id (its definition's), which is its channel id
 * and namespaces its keys, and its one key: per conversation, the bot's
 * status reactions on the person's messages (so the next status takes the
 * last one off). The key is declared in the definition, so `/purge` deletes
 * it and idle retention expires it with the conversation.
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys and is its channel id. */
export const FEISHU_PLUGIN_ID = 'feishu';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const FEISHU_CONVERSATION_KEYS = ['reactions'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, FEISHU_PLUGIN_ID)));

/** The bot's status reactions: a hash, `<message id>:<emoji type>` → the reaction's `reaction_id`. */
export const reactionsKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reactions');
