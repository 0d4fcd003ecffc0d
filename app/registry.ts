/**
 * The plugin registry: the built-in plugins plus any module the configuration
 * names (`plugins`, or `runner.plugin` given as a module specifier). Adding a
 * built-in plugin is one folder under `plugins/` and one line in `BUILTIN_PLUGINS`.
 */
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ChannelPluginDefinition } from 'steerbot/channel';
import type { RunnerPluginDefinition } from 'steerbot/runner';
import discord from '../plugins/discord/index.js';
import email from '../plugins/email/index.js';
import feishu from '../plugins/feishu/index.js';
import httpAgent from '../plugins/http-agent/index.js';
import line from '../plugins/line/index.js';
import localAgent from '../plugins/local-agent/index.js';
import matrix from '../plugins/matrix/index.js';
import slack from '../plugins/slack/index.js';
import teams from '../plugins/teams/index.js';
import telegram from '../plugins/telegram/index.js';
import web from '../plugins/web/index.js';
import webhooks from '../plugins/webhook/index.js';
import whatsapp from '../plugins/whatsapp/index.js';
import { ConfigError, type ConfigIssue } from '../src/errors.js';
import { PLUGIN_ID_RE } from '../src/plugin/definition.js';

/** A channel or runner plugin definition. */
export type AnyDefinition = ChannelPluginDefinition | RunnerPluginDefinition;

/** The plugins that ship with steerbot. */
export const BUILTIN_PLUGINS: readonly AnyDefinition[] = [
  telegram,
  discord,
  slack,
  whatsapp,
  line,
  matrix,
  feishu,
  teams,
  email,
  webhooks,
  web,
  localAgent,
  httpAgent,
] as AnyDefinition[];

/** Registered plugins by kind and id. */
export interface PluginRegistry {
  channels: ReadonlyMap<string, ChannelPluginDefinition>;
  runners: ReadonlyMap<string, RunnerPluginDefinition>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Checks the shape of a definition from a module; returns what is wrong with it, or undefined. */
function definitionProblem(def: unknown): string | undefined {
  if (!isObject(def)) return 'exports no plugin definition (expected a default export or `plugin`)';
  if (typeof def.id !== 'string' || !PLUGIN_ID_RE.test(def.id)) return 'has a bad id: expected 1-32 characters of a-z 0-9 - (starting with a letter or digit)';
  if (def.kind !== 'channel' && def.kind !== 'runner') return `${def.id}: kind must be "channel" or "runner"`;
  if (!isObject(def.configSchema) || typeof (def.configSchema as { safeParse?: unknown }).safeParse !== 'function')
    return `${def.id}: configSchema must be a zod schema`;
  if (typeof def.create !== 'function') return `${def.id}: create must be a function`;
  return undefined;
}

/**
 * A module specifier as `import()` takes it. Relative paths and package names
 * resolve from the working directory (the project that runs steerbot), not
 * from steerbot's own folder, so a plugin installed next to steerbot is found
 * under any package manager's layout.
 */
function importTarget(specifier: string): string {
  if (specifier.startsWith('.') || specifier.startsWith('/')) return pathToFileURL(resolve(specifier)).href;
  try {
    return pathToFileURL(createRequire(resolve('package.json')).resolve(specifier)).href;
  } catch {
    // An import-only package (no `require` condition): let `import()` resolve it from here.
    return specifier;
  }
}

/**
 * Loads the plugin definition a module exports (default export, or `plugin`).
 * @throws ConfigError at `where` when the module cannot be loaded or exports no valid definition.
 */
export async function loadPluginModule(specifier: string, where: string): Promise<AnyDefinition> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(importTarget(specifier))) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError([{ path: where, message: `cannot load plugin module ${specifier}: ${(err as Error).message}` }]);
  }
  const def = mod.default ?? mod.plugin;
  const problem = definitionProblem(def);
  if (problem) throw new ConfigError([{ path: where, message: `plugin module ${specifier} ${problem}` }]);
  return def as AnyDefinition;
}

/** Builds a registry; two plugins of one kind with the same id are an error. */
export function createRegistry(definitions: readonly AnyDefinition[]): PluginRegistry {
  const channels = new Map<string, ChannelPluginDefinition>();
  const runners = new Map<string, RunnerPluginDefinition>();
  const issues: ConfigIssue[] = [];
  for (const def of definitions) {
    const map: Map<string, AnyDefinition> = def.kind === 'channel' ? channels : runners;
    const taken = map.get(def.id);
    if (taken && taken !== def) issues.push({ path: 'plugins', message: `two ${def.kind} plugins have the id ${def.id}` });
    map.set(def.id, def);
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return { channels, runners };
}

/** What the raw configuration names: extra modules and the runner plugin. */
export interface PluginSelection {
  /** `plugins`: extra plugin modules. */
  modules: readonly string[];
  /** `runner.plugin`: a registered id or a module specifier. */
  runner: string;
}

/** The registry for a configuration: built-ins, its `plugins` modules, and its runner plugin when that is a module. Returns the runner plugin's id too. */
export async function resolvePlugins(selection: PluginSelection): Promise<{ registry: PluginRegistry; runnerId: string }> {
  const issues: ConfigIssue[] = [];
  const loaded: AnyDefinition[] = [];
  const load = async (specifier: string, where: string) => {
    try {
      const def = await loadPluginModule(specifier, where);
      loaded.push(def);
      return def;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      issues.push(...err.issues);
      return undefined;
    }
  };
  await Promise.all(selection.modules.map((m, i) => load(m, `plugins.${i}`)));
  let runnerId = selection.runner;
  const known = () => [...BUILTIN_PLUGINS, ...loaded].some((d) => d.kind === 'runner' && d.id === runnerId);
  if (!known()) {
    if (PLUGIN_ID_RE.test(runnerId) && !runnerId.includes('/')) {
      const ids = [...BUILTIN_PLUGINS, ...loaded].filter((d) => d.kind === 'runner').map((d) => d.id);
      issues.push({
        path: 'runner.plugin',
        message: `unknown runner plugin ${runnerId} (registered: ${ids.join(', ')}; or give a module path such as ./my-agent.js)`,
      });
    } else {
      const def = await load(runnerId, 'runner.plugin');
      if (def && def.kind !== 'runner') issues.push({ path: 'runner.plugin', message: `${runnerId} is a ${def.kind} plugin, not a runner` });
      if (def) runnerId = def.id;
    }
  }
  if (issues.length > 0) throw new ConfigError(issues);
  return { registry: createRegistry([...BUILTIN_PLUGINS, ...loaded]), runnerId };
}
