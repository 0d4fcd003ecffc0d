/**
 * One scope model: who may talk is said by `access`, what they get by
 * `bindings` → `profiles`; channel sections hold platform settings only.
 * Configurations written before that still load for a release: at load, the
 * old keys (a channel's `allowedUsers` / `allowedChats` / `allowedSenders` /
 * `admins` / `policy`, the local agent's `personas` and `toolPolicy.channels`)
 * are translated into the new model here, each named in a deprecation
 * warning with its new key. An old key and its new key set to different
 * values is a ConfigError: the file says two things and neither wins silently.
 * `steerbot check-config --migrate` prints the translated file.
 */
import { type LoadConfigOptions, readConfigFile } from '../src/config/load.js';
import { ConfigError } from '../src/errors.js';
import { migrateAccess } from './migrate-access.js';
import { migrateProfiles } from './migrate-profiles.js';
import { type Deprecation, isObj, type MigrationSink, type Obj } from './migration-kit.js';

export { type Deprecation, isObj } from './migration-kit.js';

/** The old keys each deprecated setting maps to, for the reference's "Deprecated keys" table. */
export const DEPRECATED_KEYS: ReadonlyArray<{ oldKey: string; newKey: string }> = [
  { oldKey: 'channels.<channel>.allowedUsers', newKey: 'access.channels.<channel>.users (policy `allowlist`)' },
  { oldKey: 'channels.webhooks.<name>.allowedSenders', newKey: 'access.channels.webhook:<name>.users (policy `allowlist`)' },
  { oldKey: 'channels.<channel>.allowedChats', newKey: 'access.channels.<channel>.groups (group chats) and .users (direct chats)' },
  { oldKey: 'channels.<channel>.admins', newKey: 'access.channels.<channel>.admins' },
  { oldKey: 'channels.<channel>.policy', newKey: 'profiles.<name>.inputPolicy with a binding `{ "channel": "<channel>" }`' },
  { oldKey: 'agents.local-agent.personas.<key>', newKey: 'profiles.<name>.systemPrompt / systemPromptFile with a binding on the chat or channel' },
  { oldKey: 'agents.local-agent.toolPolicy.channels.<channel>', newKey: 'profiles.<name>.toolPolicy with a binding `{ "channel": "<channel>" }`' },
];

/**
 * Translates the old scope keys of a raw configuration (file and variables
 * applied) in place and returns what it found. Leaves anything it does not
 * recognise for the schema to report.
 * @throws ConfigError when an old key and its new key say different things.
 */
export function migrateScopeKeys(raw: Obj): Deprecation[] {
  const sink: MigrationSink = { deprecations: [], issues: [] };
  migrateAccess(raw, sink);
  migrateProfiles(raw, sink);
  if (sink.issues.length > 0) throw new ConfigError(sink.issues);
  return sink.deprecations;
}

/** The warning line for one deprecation. */
export function deprecationWarning(d: Deprecation): string {
  return `${d.oldKey} is deprecated and will be removed: use ${d.newKey} (\`steerbot check-config --migrate\` rewrites the file)${d.note ? `. Note: ${d.note}` : ''}`;
}

// The deprecations found when each configuration was loaded.
const deprecationsOf = new WeakMap<object, readonly Deprecation[]>();

/** Remembers what loading `config` translated (`configDeprecations`). */
export function noteDeprecations(config: { channels: object }, found: readonly Deprecation[]): void {
  deprecationsOf.set(config, found);
  // A copy with a section changed (`{ ...config, http }`) shares its `channels`: it is the same file.
  deprecationsOf.set(config.channels, found);
}

/** The old keys a loaded configuration (or a shallow copy of it) used, for start-up warnings; [] for one built in code. */
export function configDeprecations(config: { channels: object }): readonly Deprecation[] {
  return deprecationsOf.get(config) ?? deprecationsOf.get(config.channels) ?? [];
}

/**
 * `steerbot check-config --migrate`: the config file rewritten in the new
 * model, as JSON, and what changed. Only the file: variables stay where they
 * are. Secrets stay as written: it is the person's own file going to their
 * own terminal, and the output is meant to replace the file.
 * @throws ConfigError when there is no file, it cannot be read, or an old key conflicts with its new key.
 */
export function migrateConfigFile(opts: LoadConfigOptions): { text: string; deprecations: Deprecation[] } {
  const layers = readConfigFile(opts);
  if (layers.issues.length > 0) throw new ConfigError(layers.issues);
  if (!layers.file) throw new ConfigError([{ path: 'config', message: '--migrate rewrites a config file: name one with --config or STEERBOT_CONFIG' }]);
  const json = structuredClone(layers.file.json);
  if (!isObj(json)) throw new ConfigError([{ path: 'config', message: `${layers.file.name} does not hold a JSON object` }]);
  const deprecations = migrateScopeKeys(json);
  return { text: `${JSON.stringify(json, null, 2)}\n`, deprecations };
}
