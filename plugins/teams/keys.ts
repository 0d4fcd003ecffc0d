/**
 * The Teams channel's own Redis keys (plugin storage of `teams`), per
 * conversation: the conversation reference (the service URL replies and
 * proactive messages go to), kept from the newest message. Declared in the
 * definition, so `/purge` deletes it and idle retention expires it with the
 * conversation (a later send then uses the configured `serviceUrl`).
 */
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys. */
export const TEAMS_PLUGIN_ID = 'teams';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const TEAMS_CONVERSATION_KEYS = ['reference'] as const;

let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, TEAMS_PLUGIN_ID)));

/** The conversation reference: a string, the service URL of the newest message of the conversation. */
export const referenceKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reference');
