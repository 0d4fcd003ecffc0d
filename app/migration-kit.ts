/** What the old-key translations (app/config-migration.ts) share: raw JSON helpers and what they collect. */
import type { ConfigIssue } from '../src/errors.js';

/** A JSON object of a raw configuration. */
export type Obj = Record<string, unknown>;

/** One old key found in a configuration, and what replaced it. */
export interface Deprecation {
  /** The old key's dotted path, e.g. `channels.telegram.allowedUsers`. */
  oldKey: string;
  /** Where its value went, e.g. `access.channels.telegram.users`. */
  newKey: string;
  /** Where the new model differs from what the old key did, when it does. */
  note?: string;
}

/** What a migration collects while it translates. */
export interface MigrationSink {
  deprecations: Deprecation[];
  issues: ConfigIssue[];
}

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The object at `key` of `parent`, created when absent. */
export function objAt(parent: Obj, key: string): Obj {
  const v = parent[key];
  if (isObj(v)) return v;
  const created: Obj = {};
  parent[key] = created;
  return created;
}
