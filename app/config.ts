/**
 * The whole configuration: the core sections plus each registered plugin's
 * section (`channels.<id>`, `agents.<id>`), validated by the plugin's own
 * schema, with its environment variables. `loadConfig` reads the file and the
 * environment, loads the plugin modules the configuration names, and
 * validates everything at once.
 */

import type { EnvBinding, PluginEnvBinding } from 'steerbot/plugin';
import { z } from 'zod';
import type { DiscordConfig } from '../plugins/discord/config.js';
import type { EmailConfig } from '../plugins/email/config.js';
import type { FeishuConfig } from '../plugins/feishu/config.js';
import type { LineConfig } from '../plugins/line/config.js';
import type { localAgentConfigSchema } from '../plugins/local-agent/index.js';
import type { MatrixConfig } from '../plugins/matrix/config.js';
import type { SlackConfig } from '../plugins/slack/config.js';
import type { TeamsConfig } from '../plugins/teams/config.js';
import type { TelegramConfig } from '../plugins/telegram/config.js';
import type { WebConfig } from '../plugins/web/config.js';
import type { WebhookChannelConfig } from '../plugins/webhook/config.js';
import type { WhatsAppConfig } from '../plugins/whatsapp/config.js';
import {
  applyEnv,
  CORE_ENV_BINDINGS,
  type ConfigLayers,
  type CoreConfig,
  coreConfigSchema,
  type LoadConfigOptions,
  readConfigFile,
  validateConfig,
} from '../src/config/load.js';
import { declareSecrets } from '../src/config/secrets.js';
import { ConfigError } from '../src/errors.js';
import { type Deprecation, isObj, migrateScopeKeys, noteDeprecations } from './config-migration.js';
import { type AnyDefinition, BUILTIN_PLUGINS, createRegistry, type PluginRegistry, resolvePlugins } from './registry.js';

/** The configuration, defaults applied: the core sections plus the plugin sections. */
export interface SteerbotConfig extends CoreConfig {
  /** Channel settings by channel plugin id; a channel runs when its section is present. */
  channels: {
    telegram?: TelegramConfig;
    discord?: DiscordConfig;
    slack?: SlackConfig;
    whatsapp?: WhatsAppConfig;
    line?: LineConfig;
    matrix?: MatrixConfig;
    feishu?: FeishuConfig;
    teams?: TeamsConfig;
    email?: EmailConfig;
    webhooks?: Record<string, WebhookChannelConfig>;
    web?: WebConfig;
    [id: string]: unknown;
  };
  /** Runner plugin settings by plugin id; the selected runner's section is always present. */
  agents: {
    'local-agent'?: z.output<typeof localAgentConfigSchema>;
    [id: string]: unknown;
  };
}

/** The runner plugin of a configuration that names none (`runner.plugin`): the built-in local agent. */
const DEFAULT_RUNNER_PLUGIN = 'local-agent';

/** The core sections with the composition's defaults: the core names no plugin, so the default runner is filled in here. */
export const configSchema = coreConfigSchema.extend({
  runner: coreConfigSchema.shape.runner
    .extend({
      plugin: coreConfigSchema.shape.runner.shape.plugin
        .default(DEFAULT_RUNNER_PLUGIN)
        .describe(
          'The runner plugin: a registered id (`local-agent`) or a module specifier (`./my-agent.js`, `my-agent-package`) loaded at start. Its settings live under `agents.<id>`. Default `local-agent`.',
        ),
    })
    .prefault({}),
});

/** What a config file may contain. */
export type SteerbotConfigInput = z.input<typeof configSchema>;

/** Types a configuration object (identity at run time): `export default defineConfig({ ... })`. */
export function defineConfig(config: SteerbotConfigInput): SteerbotConfigInput {
  return config;
}

/** The full schema for a registry: every plugin's section validated by its own schema. */
export function buildConfigSchema(registry: PluginRegistry) {
  const sections = (defs: Iterable<AnyDefinition>) => Object.fromEntries([...defs].map((d) => [d.id, d.configSchema.optional()]));
  return configSchema
    .extend({
      channels: z.strictObject(sections(registry.channels.values())).prefault({}),
      agents: z.strictObject(sections(registry.runners.values())).prefault({}),
    })
    .superRefine((c, ctx) => {
      if (!c.host.enabled && !c.runner.enabled) {
        ctx.addIssue({
          code: 'custom',
          path: ['host', 'enabled'],
          message: 'host and runner are both disabled; enable at least one (STEERBOT_HOST / STEERBOT_RUNNER)',
        });
      }
      // Discord catch-up hands the host messages up to this old again; older than the dedupe keys, an
      // answered message would no longer be a duplicate and would be answered twice.
      const catchUp = (c.channels.discord as DiscordConfig | undefined)?.catchUpMaxAgeSeconds ?? 0;
      if (catchUp > c.dispatch.dedupeTtlSeconds) {
        ctx.addIssue({
          code: 'custom',
          path: ['channels', 'discord', 'catchUpMaxAgeSeconds'],
          message: `must not exceed dispatch.dedupeTtlSeconds (${c.dispatch.dedupeTtlSeconds}): older messages would no longer be recognised as answered`,
        });
      }
    });
}

/** A plugin's variables with absolute paths: a channel's apply only once its section exists (its token enables it). */
function absolute(def: AnyDefinition, b: PluginEnvBinding): EnvBinding {
  const section = `${def.kind === 'channel' ? 'channels' : 'agents'}.${def.id}`;
  const binding: EnvBinding = { env: b.env, path: `${section}.${b.path}`, kind: b.kind, ...(b.secret && { secret: true }) };
  return def.kind === 'channel' && !b.enables ? { ...binding, onlyWith: section } : binding;
}

/** Every environment variable of a registry, core first; the runner plugin's only for the selected runner. */
export function envBindings(registry: PluginRegistry, runnerId: string = DEFAULT_RUNNER_PLUGIN): EnvBinding[] {
  const runner = registry.runners.get(runnerId);
  const defs: AnyDefinition[] = [...registry.channels.values(), ...(runner ? [runner] : [])];
  return [...CORE_ENV_BINDINGS, ...defs.flatMap((d) => (d.env ?? []).map((b) => absolute(d, b)))];
}

/**
 * Paths of the plugin settings declared `secret: true` (`channels.acme.signingKey`), whatever they are named.
 * The core's own secrets are named like secrets and redacted by name (a Redis URL only loses its password).
 */
export function secretSettingPaths(registry: PluginRegistry, runnerId: string = DEFAULT_RUNNER_PLUGIN): string[] {
  return envBindings(registry, runnerId)
    .slice(CORE_ENV_BINDINGS.length)
    .filter((b) => b.secret)
    .map((b) => b.path);
}

/** The string values at dotted `paths` of a configuration. */
function valuesAt(config: unknown, paths: readonly string[]): string[] {
  return paths.flatMap((path) => {
    let at: unknown = config;
    for (const seg of path.split('.')) at = typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[seg] : undefined;
    return typeof at === 'string' ? [at] : [];
  });
}

// The declared secret settings of each loaded configuration (a copy of one is looked up against the built-ins).
const secretPathsOf = new WeakMap<object, string[]>();

/**
 * Declares the values of a configuration's secret settings (`declareSecrets`): from then on errors, every
 * logger and `check-config` redact them wherever they appear. Returns the settings' paths.
 */
export function declareConfigSecrets(config: SteerbotConfig, registry: PluginRegistry = BUILTIN_REGISTRY, runnerId = config.runner.plugin): string[] {
  const paths = secretSettingPaths(registry, runnerId);
  declareSecrets(valuesAt(config, paths));
  secretPathsOf.set(config, paths);
  return paths;
}

/** Paths of a configuration's secret settings: as declared when it was loaded, else those of the built-in plugins. */
export function secretSettingsOf(config: SteerbotConfig): string[] {
  return secretPathsOf.get(config) ?? secretSettingPaths(BUILTIN_REGISTRY, config.runner.plugin);
}

/** The built-in plugins only. */
export const BUILTIN_REGISTRY: PluginRegistry = createRegistry(BUILTIN_PLUGINS);

function validate(layers: ConfigLayers, registry: PluginRegistry, runnerId: string, env: NodeJS.ProcessEnv): SteerbotConfig {
  applyEnv(layers, envBindings(registry, runnerId).slice(CORE_ENV_BINDINGS.length), env);
  const deprecations = translateOldKeys(layers);
  // The selected runner plugin always gets its section, so its schema's defaults (and required fields) apply.
  // Channels on without configuration (the web chat) always get their section; their settings turn them off.
  const channels = (layers.raw.channels ??= {});
  if (typeof channels === 'object' && channels !== null && !Array.isArray(channels)) {
    for (const def of registry.channels.values()) if (def.defaultEnabled) (channels as Record<string, unknown>)[def.id] ??= {};
  }
  const agents = (layers.raw.agents ??= {});
  if (typeof agents === 'object' && agents !== null && !Array.isArray(agents)) (agents as Record<string, unknown>)[runnerId] ??= {};
  const config = normalizeAccessIds(validateConfig(buildConfigSchema(registry), layers) as SteerbotConfig, registry);
  declareConfigSecrets(config, registry, runnerId);
  noteDeprecations(config, deprecations);
  return config;
}

/**
 * The configuration with the user ids `access.channels.<id>.users` and `admins` list spelled as the
 * channel's plugin names senders (`normalizeUserId`), so `Alice@Example.com` matches the sender alice@example.com.
 */
function normalizeAccessIds(config: SteerbotConfig, registry: PluginRegistry): SteerbotConfig {
  const normalizerOf = (channelId: string) => {
    for (const def of registry.channels.values()) {
      if (def.normalizeUserId && (channelId === def.id || channelId.startsWith(`${def.id}:`))) return def.normalizeUserId;
    }
    return undefined;
  };
  const channels = Object.fromEntries(
    Object.entries(config.access.channels).map(([id, access]) => {
      const normalize = normalizerOf(id);
      if (!normalize) return [id, access];
      const each = (ids: readonly string[]) => [...new Set(ids.map((u) => normalize(u)))];
      return [id, { ...access, users: each(access.users), admins: each(access.admins) }];
    }),
  );
  return { ...config, access: { ...config.access, channels } };
}

/** The old scope keys translated into `access` and profiles (app/config-migration.ts); a conflict joins the other issues. */
function translateOldKeys(layers: ConfigLayers): Deprecation[] {
  if (!isObj(layers.raw)) return [];
  try {
    return migrateScopeKeys(layers.raw);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new ConfigError([...layers.issues, ...err.issues]);
  }
}

/** Reads the core layers: file, then core variables. */
function coreLayers(opts: LoadConfigOptions): ConfigLayers {
  const layers = readConfigFile(opts);
  applyEnv(layers, CORE_ENV_BINDINGS, opts.env ?? process.env);
  return layers;
}

/** What the raw layers select: plugin modules and the runner plugin. */
function selection(layers: ConfigLayers): { modules: string[]; runner: string } {
  const raw = layers.raw;
  const modules = Array.isArray(raw.plugins) ? raw.plugins.filter((m): m is string => typeof m === 'string' && m.trim() !== '') : [];
  const runnerSection = raw.runner as Record<string, unknown> | undefined;
  const runner = typeof runnerSection?.plugin === 'string' && runnerSection.plugin.trim() !== '' ? runnerSection.plugin.trim() : DEFAULT_RUNNER_PLUGIN;
  return { modules, runner };
}

/**
 * Reads, overlays and validates the configuration, loading the plugin modules it names.
 * @throws ConfigError naming every bad field (dotted path, the variable or file it came from, what was expected).
 */
export async function loadConfig(opts: LoadConfigOptions = {}): Promise<SteerbotConfig> {
  const layers = coreLayers(opts);
  let resolved: { registry: PluginRegistry; runnerId: string };
  try {
    resolved = await resolvePlugins(selection(layers));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new ConfigError([...layers.issues, ...err.issues]);
  }
  return validate(layers, resolved.registry, resolved.runnerId, opts.env ?? process.env);
}

/**
 * `loadConfig` without loading modules: the built-in plugins, or the given registry.
 * @throws ConfigError as `loadConfig`; a runner plugin that is not registered is an error.
 */
export function readConfig(opts: LoadConfigOptions & { registry?: PluginRegistry } = {}): SteerbotConfig {
  const layers = coreLayers(opts);
  const registry = opts.registry ?? BUILTIN_REGISTRY;
  const { runner } = selection(layers);
  if (!registry.runners.has(runner)) {
    throw new ConfigError([
      ...layers.issues,
      { path: 'runner.plugin', message: `unknown runner plugin ${runner} (registered: ${[...registry.runners.keys()].join(', ')})` },
    ]);
  }
  return validate(layers, registry, runner, opts.env ?? process.env);
}

/** The configuration with every default and nothing set (built-in plugins). */
export const DEFAULT_CONFIG: Readonly<SteerbotConfig> = Object.freeze(readConfig({ env: {} }));
