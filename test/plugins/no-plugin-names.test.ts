/**
 * The core names no plugin: no built-in plugin's id (nor its channel id) in
 * the code of `src/`, `host/` or `runner/` outside comments. Plugins keep
 * their keys, headers and special cases in their own folders.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Built-in plugin and channel ids; `web` only as a whole word (not `webhook` or `website`). */
const NAMES = /telegram|discord|whatsapp|webhook|\bweb\b|local-agent|http-agent/i;
/** Where the core may still name a plugin, each with its reason: nowhere (the default runner is app/'s choice). */
const ALLOWED: ReadonlyArray<[file: string, text: string]> = [];

function files(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path);
    return /\.(ts|lua|js)$/.test(e.name) ? [path] : [];
  });
}

/** The code of a file with its comments blanked (line comments, block comments, Lua comments). */
function code(path: string, text: string): string {
  if (path.endsWith('.lua')) return text.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
  // A `//` inside a string (a URL) is kept: only comments that start a line or follow code after whitespace go.
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '$1');
}

describe('the core', () => {
  it('names no built-in plugin outside comments in src/, host/ and runner/', () => {
    const found: string[] = [];
    for (const path of ['src', 'host', 'runner'].flatMap(files)) {
      const lines = code(path, readFileSync(join(ROOT, path), 'utf8')).split('\n');
      lines.forEach((line, i) => {
        if (!NAMES.test(line)) return;
        if (ALLOWED.some(([file, text]) => file === path && line.includes(text))) return;
        found.push(`${path}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });
});
