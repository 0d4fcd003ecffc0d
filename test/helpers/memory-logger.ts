/** A logger writing into memory, for tests of what gets logged. */
import { BUILTIN_PLUGINS } from '../../app/registry.js';
import { createLogger, type Logger, pluginRedactPaths } from '../../src/logger.js';

/** `raw()` is everything written; `lines()` parses it, one JSON object per line. */
export function memoryLogger(opts: { level?: string; secrets?: string[] } = {}): {
  logger: Logger;
  raw(): string;
  lines(): Array<Record<string, any>>;
} {
  const chunks: string[] = [];
  const logger = createLogger({
    level: opts.level ?? 'info',
    ...(opts.secrets && { secrets: opts.secrets }),
    // What the composition gives the process logger: the built-in plugins' declared redactions.
    redactPaths: pluginRedactPaths(BUILTIN_PLUGINS),
    destination: { write: (s: string) => void chunks.push(s) },
  });
  return {
    logger,
    raw: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, any>),
  };
}
