/**
 * The email channel's own Redis keys (plugin storage of `email`): the lease
 * of the one host watching the mailbox and the mailbox cursor, outside any
 * conversation; per conversation, the thread a reply continues. The
 * conversation key is declared in the definition, so `/purge` deletes it and
 * idle retention expires it with the conversation.
 */
import { createHash } from 'node:crypto';
import { storage } from 'steerbot/plugin';

/** The plugin's id (its definition's), which namespaces its keys and is its channel id. */
export const EMAIL_PLUGIN_ID = 'email';

/** Keys the plugin keeps per conversation: `storage.conversationKeys` of its definition. */
export const EMAIL_CONVERSATION_KEYS = ['thread'] as const;

// One storage for the process's prefix, not one per key.
let cached: storage.PluginStorage | undefined;
const keys = (prefix: string): storage.PluginStorage => (cached?.prefix === prefix ? cached : (cached = storage.pluginStorage(prefix, EMAIL_PLUGIN_ID)));

/** The lease of the one host that watches the mailbox. */
export const pollLeaseKey = (prefix: string): string => keys(prefix).key('poll_lease');

/**
 * The mailbox cursor: a hash `{ validity, uid }` (UIDVALIDITY and the last UID
 * handed to the host), one per server, login and mailbox, so a cursor is
 * never applied to another mailbox when the settings change.
 */
export const cursorKey = (prefix: string, imapHost: string, user: string, mailbox: string): string =>
  keys(prefix).key(`cursor:${createHash('sha256').update(`${imapHost}\n${user}\n${mailbox}`).digest('hex').slice(0, 16)}`);

/** The thread of a conversation: a hash (`to`, `subject`, `last`, `refs`) that replies are addressed and threaded by. */
export const threadKey = (prefix: string, conversationId: string): string => keys(prefix).conversationKey(conversationId, 'thread');
