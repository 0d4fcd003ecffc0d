/**
 * Validation of one plugin's own settings when its factory is called
 * directly (defaults applied), with errors named by the section's full path.
 */
import type { z } from 'zod';
import { ConfigError, type ConfigIssue } from '../errors.js';

/**
 * Parses `value` with `schema`.
 * @param path the section's place in the configuration, e.g. `['channels', 'telegram']`.
 * @param issues problems the caller already found; they are reported together with the schema's.
 * @throws ConfigError naming every bad field by its dotted path.
 */
export function parseSection<S extends z.ZodType>(schema: S, value: unknown, path: readonly string[], issues: ConfigIssue[] = []): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) issues.push(...parsed.error.issues.map((i) => ({ path: [...path, ...i.path.map(String)].join('.'), message: i.message })));
  if (issues.length > 0 || !parsed.success) throw new ConfigError(issues);
  return parsed.data;
}

/**
 * Refuses settings that moved out of a channel section (who may talk went to
 * `access`, the input policy to profiles). Loading a configuration translates
 * them (a deprecation warning names each); a plugin built in code with them
 * set would otherwise drop them silently, and an allow-list dropped silently
 * lets everyone in.
 * @param moved the keys and where each went, e.g. `{ allowedUsers: 'access.channels.telegram.users' }`.
 * @throws ConfigError naming each one set (a non-empty list, or any other value).
 */
export function refuseMovedSettings(section: object, path: readonly string[], moved: Record<string, string>): void {
  const issues: ConfigIssue[] = [];
  for (const [key, to] of Object.entries(moved)) {
    const value = (section as Record<string, unknown>)[key];
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    issues.push({ path: [...path, key].join('.'), message: `moved to ${to}: set it there (loading a config file translates it)` });
  }
  if (issues.length > 0) throw new ConfigError(issues);
}
