/**
 * The shape every plugin module exports: one definition with its id, kind,
 * zod config schema, environment bindings and factory. Built-in plugins are
 * defined the same way; the composition registers them and any module the
 * configuration names.
 */
import type { z } from 'zod';
import type { EnvBinding } from '../config/load.js';
import type { PluginRedaction } from '../logger.js';
import type { PluginStorageDeclaration } from './storage.js';

/** A plugin's environment variable: `path` is relative to the plugin's own section. */
export interface PluginEnvBinding extends Pick<EnvBinding, 'env' | 'path' | 'kind' | 'secret'> {
  /**
   * Setting this variable turns the plugin on (a channel's token). Other
   * variables of a channel apply only when its section exists. Default false.
   */
  enables?: boolean;
}

/** A plugin module's definition. */
export interface PluginDefinition<K extends 'channel' | 'runner', S extends z.ZodType, D, I> {
  /** Unique id, 1-32 of `a-z 0-9 -`; also the key of its settings (`channels.<id>` or `agents.<id>`). */
  id: string;
  /** What it plugs into. */
  kind: K;
  /** Validates the plugin's own settings (defaults applied); errors name the field and the variable it came from. */
  configSchema: S;
  /** Environment variables that set its settings. Default: none. */
  env?: readonly PluginEnvBinding[];
  /**
   * A channel that runs without configuration (the web chat): its section is
   * always present, so its defaults apply; its own settings turn it off. Default false.
   */
  defaultEnabled?: boolean;
  /** Keys the plugin keeps per conversation (`PluginStorage.conversationKey`): purged and expired with the conversation. Default: none. */
  storage?: PluginStorageDeclaration;
  /**
   * What the logger censors for this plugin: secret request headers and paths in its
   * settings (values of `secret` env bindings are scrubbed from every line anyway). Default: none.
   */
  redact?: PluginRedaction;
  /**
   * A channel's one spelling of a user id, as its inbound messages name senders
   * (email lower-cases addresses). The configuration is loaded with the ids in
   * `access.channels.<id>.users` and `admins` of the plugin's channels (`<id>`,
   * `<id>:<name>`) passed through it, so an entry matches however the operator
   * wrote it. Must be pure and return an id unchanged when it is already
   * normalised. Default: ids are compared as written.
   */
  normalizeUserId?(userId: string): string;
  /** One line for `check-config` and the docs. */
  description?: string;
  /** Builds the plugin from its validated settings (at start). May throw ConfigError. */
  create(config: z.output<S>, deps: D): I | Promise<I>;
}

/** Ids plugins may have. */
export const PLUGIN_ID_RE = /^[a-z0-9][a-z0-9-]{0,31}$/;
