/**
 * What a Redis holds, by key family: `MEMORY USAGE` of every key, grouped by
 * its name with hash tags and id-like parts (anything with a digit) as `*`,
 * and the record streams (`…:log`) apart, so a bench can print the bytes per
 * message that are not the record itself.
 */
import type { Redis } from 'ioredis';

/** Bytes and keys of one family of keys. */
export interface Family {
  pattern: string;
  keys: number;
  bytes: number;
}

/** A Redis' memory, split into the record and the rest. */
export interface Footprint {
  /** INFO `used_memory`. */
  usedMemory: number;
  /** `MEMORY USAGE` of the record streams. */
  recordBytes: number;
  /** Every other family, largest first. */
  families: Family[];
}

const familyOf = (key: string) =>
  key
    .replace(/\{[^}]*\}/g, '{}')
    .split(':')
    .map((s) => (/\d/.test(s) ? '*' : s))
    .join(':');

/** Measures `client`'s Redis (all keys; a bench runs on a private server). */
export async function footprint(client: Redis): Promise<Footprint> {
  const usedMemory = Number(/^used_memory:(\d+)/m.exec(await client.info('memory'))?.[1]);
  const families = new Map<string, Family>();
  let recordBytes = 0;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const pipeline = client.pipeline();
    for (const k of keys) pipeline.memory('USAGE', k, 'SAMPLES', '0');
    const sizes = ((await pipeline.exec()) ?? []).map(([, v]) => Number(v ?? 0));
    keys.forEach((k, i) => {
      const bytes = sizes[i] ?? 0;
      if (k.endsWith(':log')) {
        recordBytes += bytes;
        return;
      }
      const pattern = familyOf(k);
      const f = families.get(pattern) ?? { pattern, keys: 0, bytes: 0 };
      f.keys++;
      f.bytes += bytes;
      families.set(pattern, f);
    });
  } while (cursor !== '0');
  return { usedMemory, recordBytes, families: [...families.values()].sort((a, b) => b.bytes - a.bytes) };
}

/** The figure per message beyond the record: growth of `used_memory` since `before`, less the record, over `messages`. */
export function perMessageBeyondRecord(before: number, after: Footprint, messages: number): number {
  return messages > 0 ? (after.usedMemory - before - after.recordBytes) / messages : 0;
}

/** Lines that print a footprint's largest families, per message. */
export function familyLines(f: Footprint, messages: number, top = 8): string[] {
  return f.families
    .slice(0, top)
    .map((x) => `  ${(x.bytes / Math.max(1, messages)).toFixed(0).padStart(6)} B/msg  ${String(x.keys).padStart(7)} keys  ${x.pattern}`);
}
