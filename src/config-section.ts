/**
 * Validation of one plugin's own settings when its factory is called
 * directly (defaults applied), with errors named by the section's full path.
 */
import type { z } from 'zod';
import { ConfigError, type ConfigIssue } from './errors.js';

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
