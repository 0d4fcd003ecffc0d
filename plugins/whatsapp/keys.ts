/**
 * The WhatsApp channel's own Redis keys (plugin storage of `whatsapp`), per
 * conversation: the newest inbound message (what the read receipt and the
 * typing indicator name) and the replies WhatsApp refused or reported
 * failed. Declared in the definition, so `/purge` deletes them and idle
 * retention expires them with the conversation.
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys. */
export const WHATSAPP_PLUGIN_ID = 'whatsapp';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const WHATSAPP_CONVERSATION_KEYS = ['last_inbound', 'delivery_failures'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, WHATSAPP_PLUGIN_ID)));

/** The id (`wamid`) of the conversation's newest inbound message the host took in (string, expires with WhatsApp's 24-hour window). */
export const lastInboundKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'last_inbound');

/** Failed replies of the conversation (hash: message id or delivery key → JSON `FailureRecord`). */
export const failuresKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'delivery_failures');
