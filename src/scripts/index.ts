/**
 * Loads the Lua scripts of this folder once per client with `defineCommand`
 * and calls them through one typed wrapper. A script file is named
 * `<verb>-<numKeys>.lua`, or `<verb>-<numKeys>n.lua` for a script that takes
 * any number of items of `numKeys` keys and as many arguments each (see
 * `ScriptBatcher`);
 * `--- @include "<name>"` lines are replaced by `includes/<name>.lua` (each
 * include at most once per script).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScriptError } from '../errors.js';

import type { RedisClient } from '../redis/connection.js';

export type { RedisClient } from '../redis/connection.js';

/** Names of the scripts in this folder. */
export type ScriptName =
  | 'ingest'
  | 'acquire'
  | 'heartbeat'
  | 'append'
  | 'pull'
  | 'finish'
  | 'request-interrupt'
  | 'reset'
  | 'request-compaction'
  | 'set-policy'
  | 'set-model'
  | 'status'
  | 'status-command'
  | 'state-set'
  | 'compaction-commit'
  | 'compact-request-clear'
  | 'reply-store'
  | 'outbox-claim'
  | 'outbox-set'
  | 'lock-release'
  | 'lease-acquire'
  | 'purge'
  | 'retain'
  | 'artifact-put'
  | 'approval-request'
  | 'approval-decide'
  | 'question-answer'
  | 'usage-add'
  | 'usage-admit'
  | 'identity-link'
  | 'identity-unlink'
  | 'identity-purge'
  | 'access-check'
  | 'access-request'
  | 'access-approve'
  | 'access-link'
  | 'access-link-code'
  | 'access-link-revoke'
  | 'send-record'
  | 'send-result'
  | 'api-admit'
  | 'api-revoke'
  | 'schedule-put'
  | 'memory-save'
  | 'memory-embed'
  | 'noop';

interface LoadedScript {
  name: ScriptName;
  /** Command name registered on the client. */
  command: string;
  /** Keys per call, or per item of a batch script. */
  numberOfKeys: number;
  /** A batch script (`-<n>n.lua`): any number of items, `numberOfKeys` keys each. */
  batch: boolean;
  lua: string;
}

const DIR = fileURLToPath(new URL('.', import.meta.url));
const INCLUDE_RE = /^--- @include "([a-z0-9-]+)"\s*$/gm;
/** A script file's name: `<verb>-<numKeys>.lua`, or `<verb>-<numKeys>n.lua` for a batch script. */
export const SCRIPT_FILE_RE = /^([a-z]+(?:-[a-z]+)*)-(\d+)(n?)\.lua$/;

/**
 * Replaces `--- @include "<name>"` lines with `<dir>/includes/<name>.lua`,
 * from the first of `dirs` that has it (each include at most once).
 * Throws ScriptError naming `file` and the include when none has it.
 */
export function resolveIncludes(source: string, file: string, dirs: readonly string[] = [DIR]): string {
  const seen = new Set<string>();
  return source.replace(INCLUDE_RE, (_line, name: string) => {
    if (seen.has(name)) return '';
    seen.add(name);
    for (const dir of dirs) {
      try {
        return readFileSync(join(dir, 'includes', `${name}.lua`), 'utf8');
      } catch {
        // Not in this folder: try the next one.
      }
    }
    throw new ScriptError(file, `missing include "${name}"`);
  });
}

/** The core's script folder, whose `includes/` a plugin script may include from. */
export const CORE_SCRIPT_DIR: string = DIR;

function loadScripts(): Map<ScriptName, LoadedScript> {
  const out = new Map<ScriptName, LoadedScript>();
  for (const file of readdirSync(DIR)) {
    const m = SCRIPT_FILE_RE.exec(file);
    if (!m) continue;
    const name = m[1] as ScriptName;
    const lua = resolveIncludes(readFileSync(join(DIR, file), 'utf8'), file);
    out.set(name, { name, command: `sb_${name.replace(/-/g, '_')}`, numberOfKeys: Number(m[2]), batch: m[3] === 'n', lua });
  }
  return out;
}

const SCRIPTS = loadScripts();
const defined = new WeakSet<object>();

/** Registers every script on `client` (idempotent). */
export function defineScripts(client: RedisClient): void {
  if (defined.has(client)) return;
  for (const s of SCRIPTS.values()) {
    // A batch script's key count varies: the caller passes it first.
    client.defineCommand(s.command, s.batch ? { lua: s.lua } : { lua: s.lua, numberOfKeys: s.numberOfKeys });
  }
  defined.add(client);
}

/** The Lua source of a script after includes, for tests and tooling. */
export function scriptSource(name: ScriptName): string {
  const s = SCRIPTS.get(name);
  if (!s) throw new ScriptError(name, 'no such script');
  return s.lua;
}

/** Number of KEYS a script takes, per item for a batch script (from its file name). */
export function scriptKeyCount(name: ScriptName): number {
  const s = SCRIPTS.get(name);
  if (!s) throw new ScriptError(name, 'no such script');
  return s.numberOfKeys;
}

/** A raw script reply: a status string or a negative error code first. */
export type ScriptReply = Array<string | number>;

/** Whether a script takes any number of items (`-<n>n.lua`). */
export function isBatchScript(name: ScriptName): boolean {
  const s = SCRIPTS.get(name);
  if (!s) throw new ScriptError(name, 'no such script');
  return s.batch;
}

/**
 * Runs one script with `keys` and `args`. The number of keys must match the
 * script's file name (a positive multiple of it for a batch script, whose
 * reply is one reply per item). Returns the raw reply; decode it with `results.ts`.
 */
export async function runScript(client: RedisClient, name: ScriptName, keys: string[], args: Array<string | number>): Promise<ScriptReply> {
  const s = SCRIPTS.get(name);
  if (!s) throw new ScriptError(name, 'no such script');
  if (s.batch ? keys.length === 0 || keys.length % s.numberOfKeys !== 0 : keys.length !== s.numberOfKeys) {
    throw new ScriptError(name, `expects ${s.batch ? 'a positive multiple of ' : ''}${s.numberOfKeys} keys, got ${keys.length}`);
  }
  defineScripts(client);
  const fn = (client as unknown as Record<string, (...a: Array<string | number>) => Promise<unknown>>)[s.command];
  if (!fn) throw new ScriptError(name, 'not registered on this client');
  const reply = s.batch ? await fn.call(client, keys.length, ...keys, ...args) : await fn.call(client, ...keys, ...args);
  if (!Array.isArray(reply)) throw new ScriptError(name, `unexpected reply ${JSON.stringify(reply)}`);
  return reply as ScriptReply;
}
