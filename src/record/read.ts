/**
 * Reading the conversation record. Every entry is validated and upcast to the
 * version this build reads; a kind or version written by a newer release is
 * skipped (it stays in the record); an entry that is not what it claims to be
 * throws RecordError (fail-closed).
 */
import { RecordError } from '../errors.js';
import { readStored } from '../redis/stored.js';
import type { RedisClient } from '../scripts/index.js';
import { ENTRY_SHAPES, type SeqEntry } from './entries.js';

/**
 * Parses one stored entry: undefined for a kind or version of a newer
 * release (kept, skipped); throws RecordError naming the seq when the entry
 * is not JSON or does not match its kind's schema.
 */
export function parseEntry(seq: number, json: string): SeqEntry | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (cause) {
    throw new RecordError(`record entry ${seq} is not JSON`, { cause });
  }
  const kind = typeof raw === 'object' && raw !== null && 'kind' in raw ? (raw as { kind: unknown }).kind : undefined;
  if (typeof kind !== 'string') throw new RecordError(`record entry ${seq} has no kind`);
  const shape = ENTRY_SHAPES.get(kind);
  if (!shape) return undefined;
  const read = readStored(shape, raw);
  if (read.kind === 'newer') return undefined;
  if (read.kind === 'invalid') throw new RecordError(`record entry ${seq}: ${read.reason}`);
  return { ...read.value, seq };
}

type StreamReply = Array<[string, string[]]>;

/** The entries of an XRANGE reply this build can read (a newer release's are skipped). */
function toEntries(reply: StreamReply): SeqEntry[] {
  return reply.flatMap(([id, fields]) => {
    const seq = Number(id.slice(0, id.indexOf('-')));
    const i = fields.indexOf('e');
    if (i < 0 || fields[i + 1] === undefined) throw new RecordError(`record entry ${seq} has no body`);
    return parseEntry(seq, fields[i + 1]!) ?? [];
  });
}

/** Options of a record read. */
export interface ReadRangeOptions {
  /** First seq to read, inclusive (default: the start). */
  fromSeq?: number;
  /** Last seq to read, inclusive (default: the end). */
  toSeq?: number;
  /** Most entries to read (default: all in range). */
  count?: number;
}

/** Reads entries in seq order. */
export async function readRange(client: RedisClient, logKey: string, opts: ReadRangeOptions = {}): Promise<SeqEntry[]> {
  const start = opts.fromSeq !== undefined ? `${opts.fromSeq}-0` : '-';
  const end = opts.toSeq !== undefined ? `${opts.toSeq}-0` : '+';
  const reply = (
    opts.count !== undefined ? await client.xrange(logKey, start, end, 'COUNT', opts.count) : await client.xrange(logKey, start, end)
  ) as StreamReply;
  return toEntries(reply);
}

/** Reads the last `count` entries, returned in seq order. */
export async function readTail(client: RedisClient, logKey: string, count: number): Promise<SeqEntry[]> {
  const reply = (await client.xrevrange(logKey, '+', '-', 'COUNT', count)) as StreamReply;
  return toEntries(reply.reverse());
}

/** Reads entries after `afterSeq` in pages of `pageSize` stored entries, yielding each page (a page may be empty when every entry in it was skipped). */
export async function* readAfter(client: RedisClient, logKey: string, afterSeq: number, pageSize = 500): AsyncGenerator<SeqEntry[]> {
  let from = afterSeq + 1;
  for (;;) {
    const reply = (await client.xrange(logKey, `${from}-0`, '+', 'COUNT', pageSize)) as StreamReply;
    if (reply.length === 0) return;
    yield toEntries(reply);
    if (reply.length < pageSize) return;
    const last = reply[reply.length - 1]![0];
    from = Number(last.slice(0, last.indexOf('-'))) + 1;
  }
}

/** Reads the entries with the given seqs (missing ones are a RecordError, a newer release's are skipped), in one round trip. */
export async function readSeqs(client: RedisClient, logKey: string, seqs: number[]): Promise<SeqEntry[]> {
  if (seqs.length === 0) return [];
  const pipeline = client.pipeline();
  for (const s of seqs) pipeline.xrange(logKey, `${s}-0`, `${s}-0`);
  const results = (await pipeline.exec()) ?? [];
  return results.flatMap(([err, reply], i) => {
    if (err) throw err;
    const rows = reply as StreamReply;
    if (rows.length === 0) throw new RecordError(`record entry ${seqs[i]} is missing`);
    return toEntries(rows);
  });
}
