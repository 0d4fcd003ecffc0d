/**
 * The configuration reference, generated from the zod schema and the
 * environment bindings: `docs/configuration.md` (a table per section) and
 * `docs/steerbot.schema.json` (a JSON Schema for editors). `npm run docs`
 * writes both; a test fails when they are out of date.
 */
import { z } from 'zod';
import { buildConfigSchema, envBindings } from './config.js';
import { DEPRECATED_KEYS } from './config-migration.js';
import type { PluginRegistry } from './registry.js';

interface JsonSchema {
  type?: string | string[];
  description?: string;
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  /** Set on old keys still accepted for a release (`.meta({ deprecated: true })`): listed apart, not as settings. */
  deprecated?: boolean;
}

/** The JSON Schema of a configuration file for `registry`. */
export function configJsonSchema(registry: PluginRegistry): Record<string, unknown> {
  return z.toJSONSchema(buildConfigSchema(registry), { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => `\`${String(v)}\``).join(' | ');
  if (s.anyOf) return s.anyOf.map(typeOf).join(' or ');
  const t = Array.isArray(s.type) ? s.type.join(' or ') : (s.type ?? 'any');
  if (t === 'array') return `list of ${s.items ? typeOf(s.items) : 'any'}`;
  const bounded = (n: number | undefined) => n !== undefined && Math.abs(n) < Number.MAX_SAFE_INTEGER;
  if ((t === 'integer' || t === 'number') && (bounded(s.minimum) || bounded(s.maximum))) {
    return `${t} ${bounded(s.minimum) ? s.minimum : ''}..${bounded(s.maximum) ? s.maximum : ''}`;
  }
  return t;
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** Markdown rows of every leaf setting under `schema`, with `path` as their prefix. */
function rows(schema: JsonSchema, path: string, env: Map<string, readonly string[]>, out: string[]): void {
  if (schema.deprecated) return;
  if (schema.properties) {
    for (const [key, child] of Object.entries(schema.properties)) rows(child, path ? `${path}.${key}` : key, env, out);
    return;
  }
  if (typeof schema.additionalProperties === 'object' && schema.additionalProperties.properties) {
    rows(schema.additionalProperties, `${path}.<name>`, env, out);
    return;
  }
  const variables = (env.get(path) ?? []).map((v) => `\`${v}\``).join(', ');
  out.push(`| \`${path}\` | ${variables} | ${cell(typeOf(schema))} | ${cell(schema.description ?? '')} |`);
}

/** The Markdown reference of every setting for `registry`. */
export function configReference(registry: PluginRegistry): string {
  const schema = configJsonSchema(registry) as JsonSchema;
  // Several variables can set one path (each provider's key sets `model.apiKey`): the row names them all.
  const env = new Map<string, string[]>();
  const bind = (path: string, variable: string) => {
    const named = env.get(path) ?? [];
    if (!named.includes(variable)) env.set(path, [...named, variable]);
  };
  for (const b of envBindings(registry)) bind(b.path, b.env);
  for (const def of registry.runners.values()) for (const b of def.env ?? []) bind(`agents.${def.id}.${b.path}`, b.env);
  const lines = [
    '# Configuration reference',
    '',
    'Generated from the configuration schema by `npm run docs`; do not edit by hand.',
    '',
    'Settings come from a JSON file (`--config file` or `STEERBOT_CONFIG`) with environment variables on top.',
    'Unknown keys are errors. `steerbot check-config` prints the effective configuration with secrets redacted.',
    'Editors can validate a config file against [`steerbot.schema.json`](steerbot.schema.json).',
    '',
    'Who may talk is said in `access` only, and what each chat or channel gets (model, prompt, tools and tool policy, input policy, memory) in `bindings` → `profiles` only; channel sections hold platform settings. Keys of the older model are listed under [Deprecated keys](#deprecated-keys).',
    '',
  ];
  for (const [section, sub] of Object.entries(schema.properties ?? {})) {
    lines.push(`## \`${section}\``, '');
    if (sub.description) lines.push(sub.description, '');
    lines.push('| setting | variable | type | description |', '| --- | --- | --- | --- |');
    const out: string[] = [];
    rows(sub, section, env, out);
    lines.push(...out, '');
  }
  lines.push(
    '## Deprecated keys',
    '',
    'Still accepted for one release: at load each is translated into its replacement and named in a start-up warning; `steerbot check-config --migrate` prints the file rewritten (docs/access.md#migration).',
    '',
    '| old key | replacement |',
    '| --- | --- |',
    ...DEPRECATED_KEYS.map((d) => `| \`${d.oldKey}\` | ${cell(d.newKey)} |`),
    '',
  );
  return `${lines.join('\n').trimEnd()}\n`;
}

/** How many settings the reference lists (its rows, deprecated keys not counted). */
export function countSettings(registry: PluginRegistry): number {
  const schema = configJsonSchema(registry) as JsonSchema;
  const out: string[] = [];
  for (const [section, sub] of Object.entries(schema.properties ?? {})) rows(sub, section, new Map(), out);
  return out.length;
}
