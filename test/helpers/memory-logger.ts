/** A logger writing into memory, for tests of what gets logged. */
import { createLogger, type Logger } from '../../src/logger.js';

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
