/**
 * `steerbot export --conversation <id> | --identity <id> [--out file]`: an
 * operator writes everything stored for a conversation or a person as one
 * JSON document (docs/people.md#export), to stdout or to a file, against the
 * Redis the configuration names. Read-only.
 *
 * An id with nothing stored writes nothing; a file is written under a name of
 * its own and renamed into place once complete, so a failed export leaves no
 * half document behind. Control characters in what people wrote are written as
 * `\uXXXX` escapes (`printableJson`): the same JSON, safe to show in a terminal.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { InvalidInputError } from '../src/errors.js';
import { Exporter, type ExportOpening } from '../src/export/exporter.js';
import { writeChunks } from '../src/export/json-stream.js';
import { redisFromConfig } from '../src/redis/connection.js';
import type { SteerbotConfig } from './config.js';
import { exportParts } from './features/index.js';
import { channelIds } from './summary.js';
import { printableJson } from './terminal-text.js';

/** What to export. */
export type ExportTarget = { conversation: string } | { identity: string };

/** What the command did: the line for stderr and the exit code (0 written, 1 nothing stored or failed, 2 a bad id). */
export interface ExportOutcome {
  code: 0 | 1 | 2;
  line: string;
}

/** Exports `target` to `out` (a file path) or stdout. */
export async function exportFromCli(config: SteerbotConfig, target: ExportTarget, out: string | undefined): Promise<ExportOutcome> {
  const redis = redisFromConfig(config.redis, { connectionName: 'steerbot-cli' });
  try {
    const prefix = config.redis.prefix;
    const exporter = new Exporter({ redis, prefix, channels: channelIds(config), parts: exportParts({ redis, prefix }) });
    let opening: ExportOpening;
    try {
      opening = 'conversation' in target ? await exporter.conversation(target.conversation) : await exporter.identity(target.identity);
    } catch (err) {
      if (err instanceof InvalidInputError) return { code: 2, line: `steerbot: ${err.message}` };
      throw err;
    }
    const what = 'conversation' in target ? `conversation ${target.conversation}` : `identity ${target.identity}`;
    if (opening.kind === 'purged') return { code: 1, line: `steerbot: ${what} was purged: nothing is stored for it` };
    if (opening.kind === 'not_found') return { code: 1, line: `steerbot: nothing is stored for ${what}` };
    const chunks = printableChunks(opening.chunks);
    if (out === undefined) {
      await writeChunks(chunks, process.stdout);
      await new Promise<void>((resolve) => process.stdout.write('\n', () => resolve()));
      return { code: 0, line: `steerbot: exported ${what}` };
    }
    await writeFile(chunks, out);
    return { code: 0, line: `steerbot: exported ${what} to ${out}` };
  } finally {
    redis.disconnect();
  }
}

/** The document's pieces with the control characters `JSON.stringify` leaves raw escaped. */
async function* printableChunks(chunks: AsyncIterable<string>): AsyncGenerator<string> {
  for await (const chunk of chunks) yield printableJson(chunk);
}

/**
 * Writes the document to a file of its own beside `path` (never an existing
 * one), renamed to `path` once complete; removed on a failure. Readable by
 * its owner only: it holds a person's messages and notes.
 */
async function writeFile(chunks: AsyncIterable<string>, path: string): Promise<void> {
  const partial = `${path}.${process.pid}.partial`;
  const file = createWriteStream(partial, { flags: 'wx', encoding: 'utf8', mode: 0o600 });
  // Refused to open (say it exists): not ours to remove.
  await once(file, 'open');
  try {
    await writeChunks(chunks, file);
    file.end('\n');
    await once(file, 'finish');
    await rename(partial, path);
  } catch (err) {
    file.destroy();
    await rm(partial, { force: true });
    throw err;
  }
}
