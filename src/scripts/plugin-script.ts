/**
 * A plugin's own Lua scripts, run through the same loader as the core's: a
 * file `<verb>-<numKeys>.lua` in the plugin's folder, starting with a `--[[`
 * header (KEYS, ARGV, Returns), `--- @include "<name>"` of the plugin's own
 * `includes/` or the core's (`common`: the error codes and `now_ms`),
 * registered with `defineCommand` once per client, key count checked, and a
 * negative first reply element mapped to the same typed errors as the core's.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ScriptError } from '../errors.js';
import type { RedisClient } from '../redis/connection.js';
import { CORE_SCRIPT_DIR, resolveIncludes, SCRIPT_FILE_RE, type ScriptReply } from './index.js';
import { checkReply } from './results.js';

/** A plugin script, loaded once; `run` registers it on a client the first time. */
export interface PluginScript {
  /** The script's verb, from its file name (`callback-advance-3.lua` → `callback-advance`). */
  readonly name: string;
  /** How many KEYS it takes (from its file name). */
  readonly numberOfKeys: number;
  /** Its source after includes (tests, tooling). */
  readonly source: string;
  /**
   * Runs the script. `keys` must be exactly `numberOfKeys` (ScriptError
   * otherwise, nothing sent). Returns the reply, a table; a negative first
   * element throws the typed error it stands for (InvalidInputError for `-5`,
   * ScriptError otherwise; see `docs/plugins.md`).
   */
  run(client: RedisClient, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<ScriptReply>;
}

/**
 * Loads a plugin's script file, e.g. `defineScript(new URL('./callback-advance-3.lua', import.meta.url))`.
 * Call it once, at module load: it reads the file synchronously.
 * @throws ScriptError when the file name is not `<verb>-<numKeys>.lua`, the file has no `--[[` header or an include is missing.
 */
export function defineScript(file: URL | string): PluginScript {
  const path = file instanceof URL || file.startsWith('file:') ? fileURLToPath(file) : file;
  const name = basename(path);
  const m = SCRIPT_FILE_RE.exec(name);
  // Batch scripts (`-<n>n.lua`) are the core's; a plugin script takes a fixed number of keys.
  if (!m || m[3] === 'n') throw new ScriptError(name, 'a plugin script file is named <verb>-<numKeys>.lua');
  let raw: string;
  try {
    raw = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ScriptError(name, 'cannot read the script file', 'SCRIPT', { cause });
  }
  if (!raw.startsWith('--[[')) throw new ScriptError(name, 'a script starts with a --[[ header naming its KEYS, ARGV and Returns');
  const source = resolveIncludes(raw, name, [dirname(path), CORE_SCRIPT_DIR]);
  const verb = m[1] as string;
  const numberOfKeys = Number(m[2]);
  // Named by content: two plugins' scripts of one name never take each other's command.
  const command = `sbp_${verb.replace(/-/g, '_')}_${createHash('sha1').update(source).digest('hex').slice(0, 12)}`;
  const defined = new WeakSet<object>();
  return {
    name: verb,
    numberOfKeys,
    source,
    async run(client, keys, args) {
      if (keys.length !== numberOfKeys) throw new ScriptError(verb, `expects ${numberOfKeys} keys, got ${keys.length}`);
      if (!defined.has(client)) {
        client.defineCommand(command, { lua: source, numberOfKeys });
        defined.add(client);
      }
      const fn = (client as unknown as Record<string, (...a: Array<string | number>) => Promise<unknown>>)[command];
      if (!fn) throw new ScriptError(verb, 'not registered on this client');
      const reply = await fn.call(client, ...keys, ...args);
      if (!Array.isArray(reply)) throw new ScriptError(verb, `unexpected reply ${JSON.stringify(reply)}`);
      return checkReply(verb, reply as ScriptReply);
    },
  };
}
