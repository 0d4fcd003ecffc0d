/**
 * Paths a tool reads confined to one folder (a skill's, the agent's
 * workspace): a path that is absolute, names `..`, or resolves through a
 * symlink anywhere on the way to outside the folder is refused
 * (docs/security.md).
 */

import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** The error code of a file system error (`ENOENT`), else its message. */
export function errCode(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}

/**
 * The real path of `file` inside `folder` (a real path: no symlink in it),
 * or why it is refused; `where` names the folder in the refusal ("the
 * skill's folder").
 */
export async function insideFolder(folder: string, file: string, where: string): Promise<string | { error: string }> {
  const refused = { error: `refused: "${file}" is not a path inside ${where}` };
  if (file.includes('\0') || isAbsolute(file) || /^[\\/]|^[A-Za-z]:/.test(file)) return refused;
  if (file.split(/[\\/]/).includes('..')) return refused;
  const lexical = resolve(folder, file);
  if (!within(folder, lexical)) return refused;
  let real: string;
  try {
    real = await realpath(lexical);
  } catch (err) {
    return { error: `cannot read ${file}: ${errCode(err)}` };
  }
  return within(folder, real) ? real : refused;
}

/** Whether `path` is strictly inside `folder`. Pure. */
function within(folder: string, path: string): boolean {
  const rel = relative(folder, path);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}
