/**
 * The Matrix channel's own Redis keys (plugin storage of `matrix`): the
 * `/sync` lease (one syncing host) and the account's `since` token the next
 * `/sync` resumes from, outside any conversation; per conversation, the
 * bot's status reaction on each message it reacted to (so the next status
 * replaces it) and the polls it sent that still wait for a response. The
 * conversation keys are declared in the definition, so `/purge` deletes
 * them and idle retention expires them with the conversation.
 */
import { createHash } from 'node:crypto';
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys and is its channel id. */
export const MATRIX_PLUGIN_ID = 'matrix';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const MATRIX_CONVERSATION_KEYS = ['reactions', 'polls'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, MATRIX_PLUGIN_ID)));

/** The lease of the one host that calls `/sync`. */
export const syncLeaseKey = (prefix: string): string => keys(prefix).key('sync_lease');

/**
 * The `next_batch` token of the last `/sync` whose events were all handed to
 * the host: a string, one per account (homeserver and user), so a token is
 * never given to another account's `/sync` when the settings change.
 */
export const sinceKey = (prefix: string, homeserverUrl: string, userId: string): string =>
  keys(prefix).key(`since:${createHash('sha256').update(`${homeserverUrl}\n${userId}`).digest('hex').slice(0, 16)}`);

/**
 * The polls the bot sent in a conversation that still wait for a response
 * (`poll-store.ts`): a hash, poll event id → JSON, each entry expiring, the
 * hash at most `MAX_KEPT_POLLS` entries and expiring a week after the
 * newest. A room's hash also points at the thread of each poll sent in one
 * of its threads.
 */
export const pollsKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'polls');

/** The bot's reaction on each message: a hash, message event id → `<status>:<reaction event id>`. */
export const reactionsKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'reactions');
