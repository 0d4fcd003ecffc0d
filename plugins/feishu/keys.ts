/**
 * The Feishu / Lark channel's id (its definition's), which is its channel id
 * and namespaces its keys, and its keys: per conversation, the bot's status
 * reactions on the person's messages (so the next status takes the last one
 * off, and a repeated one adds nothing), the order they were added in (so
 * the oldest are forgotten past a bound, `reactions.ts`), and whether it is
 * a one-to-one chat (`p2pKey`). The keys are
 * declared in the definition, so `/purge` deletes them and idle retention
 * expires them with the conversation.
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys and is its channel id. */
export const FEISHU_PLUGIN_ID = 'feishu';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const FEISHU_CONVERSATION_KEYS = ['reactions', 'reactions-order', 'p2p'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, FEISHU_PLUGIN_ID)));

/** The bot's status reactions: a hash, `<message id>:<emoji type>` → the reaction's `reaction_id`. */
export const reactionsKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reactions');

/** The fields of `reactionsKey` in the order they were added: a sorted set, the newest scored highest. */
export const reactionsOrderKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reactions-order');

/**
 * Set when the conversation is a one-to-one chat, from its messages' `chat_type`: a card click names its chat
 * but not the chat's kind, and a click in a conversation not known to be one-to-one counts as a group's.
 */
export const p2pKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'p2p');
