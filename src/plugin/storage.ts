/**
 * Storage a plugin owns: Redis key names namespaced by its plugin id. A key
 * of one conversation (`conversationKey`) carries the conversation's hash
 * tag, so a plugin script can change it atomically with the core's keys of
 * that conversation (`core`); a key outside any conversation (`key`) is the
 * plugin's alone. Conversation keys a plugin declares in its definition
 * (`storage.conversationKeys`) are deleted by `/purge` and expire with an
 * idle conversation like the core's.
 */
import { InvalidInputError } from '../errors.js';
import { conversationKeys } from '../redis/keys.js';

/** Longest key name a plugin may use, in characters. */
export const MAX_PLUGIN_KEY_NAME_LENGTH = 128;

// Letters, digits and `_ . : -`: no braces (a hash tag), no whitespace, no glob characters.
const NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9_.:-]*$/;

/** Throws InvalidInputError unless `name` is a usable plugin key name. */
export function assertPluginKeyName(name: string): void {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_PLUGIN_KEY_NAME_LENGTH || !NAME_RE.test(name)) {
    throw new InvalidInputError(
      `plugin key name must be 1-${MAX_PLUGIN_KEY_NAME_LENGTH} characters of A-Z a-z 0-9 _ . : - (not starting with . : -), got ${JSON.stringify(String(name).slice(0, 40))}`,
    );
  }
}

/** What a plugin definition declares about the keys it keeps (`PluginDefinition.storage`). */
export interface PluginStorageDeclaration {
  /**
   * Names of the keys the plugin keeps per conversation (`conversationKey(id, name)`):
   * `/purge` deletes them with the conversation, and idle retention expires them
   * with it. A key with a TTL of its own keeps the shorter one. Default: none.
   */
  conversationKeys?: readonly string[];
}

/** Core keys of one conversation a plugin may read, or change atomically from its own script (the reply-stream contract). */
export interface CoreConversationKeys {
  /** The conversation's reply stream (entries with one `data` field; written with `storeReply`). */
  readonly replies: string;
  /** The append-only conversation record (read-only for plugins: entries are the core's). */
  readonly log: string;
  /** Marks that the reply with this delivery key is in `replies` (`storeReply` sets it). */
  replyStored(deliveryKey: string): string;
}

/** A plugin id as its keys carry it. */
const PLUGIN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** Key names of one plugin. Build it with `pluginStorage`. Throws InvalidInputError for an id with other than [A-Za-z0-9_-]. */
export class PluginStorage {
  /**
   * @param prefix The key prefix (config `redis.prefix`).
   * @param pluginId The plugin's id (its definition's `id`).
   */
  constructor(
    readonly prefix: string,
    readonly pluginId: string,
  ) {
    // No `:` in the id: plugin `a` with key `b:c` and plugin `a:b` with key `c` would share a Redis key.
    if (!PLUGIN_ID_RE.test(pluginId)) throw new InvalidInputError(`plugin id ${JSON.stringify(pluginId)}: expected 1-64 of [A-Za-z0-9_-]`);
  }

  /**
   * The plugin's key `name` of a conversation: `<prefix>:{c:<conversation id>}:p:<plugin id>:<name>`,
   * in the conversation's cluster slot. Declare `name` in `storage.conversationKeys` so purge and
   * retention know it. Throws InvalidInputError for a bad conversation id or name.
   */
  conversationKey(conversationId: string, name: string): string {
    assertPluginKeyName(name);
    return `${conversationKeys(this.prefix, conversationId).base}${pluginKeySuffix(this.pluginId, name)}`;
  }

  /** The plugin's key `name` outside any conversation: `<prefix>:p:<plugin id>:<name>`. Throws InvalidInputError for a bad name. */
  key(name: string): string {
    assertPluginKeyName(name);
    return `${this.prefix}:${pluginKeySuffix(this.pluginId, name)}`;
  }

  /** The core keys of a conversation a plugin may use (see `CoreConversationKeys`). Throws InvalidInputError for a bad conversation id. */
  core(conversationId: string): CoreConversationKeys {
    const k = conversationKeys(this.prefix, conversationId);
    return { replies: k.replies, log: k.log, replyStored: (deliveryKey) => k.replyStored(deliveryKey) };
  }
}

/** The key names of plugin `pluginId` under `prefix` (default `sb`). */
export function pluginStorage(prefix: string, pluginId: string): PluginStorage {
  return new PluginStorage(prefix, pluginId);
}

/** Suffix (after the conversation's `<prefix>:{c:<id>}:`) of a plugin's conversation key. */
function pluginKeySuffix(pluginId: string, name: string): string {
  return `p:${pluginId}:${name}`;
}

/**
 * The suffixes of every conversation key the `plugins` declare, for purge and
 * retention (`ProtocolOptions.pluginKeys`). Throws InvalidInputError naming the
 * plugin when a declared name is bad.
 */
export function declaredConversationKeys(plugins: ReadonlyArray<{ id: string; storage?: PluginStorageDeclaration }>): string[] {
  const out = new Set<string>();
  for (const p of plugins) {
    for (const name of p.storage?.conversationKeys ?? []) {
      try {
        assertPluginKeyName(name);
      } catch (err) {
        throw new InvalidInputError(`plugin ${p.id}: storage.conversationKeys: ${(err as Error).message}`);
      }
      out.add(pluginKeySuffix(p.id, name));
    }
  }
  return [...out];
}
