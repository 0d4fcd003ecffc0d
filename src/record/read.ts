/**
 * Reading the conversation record. Every entry is validated; an entry this
 * build cannot read throws RecordError (fail-closed).
 */
import { RecordError } from '../errors.js';
import type { RedisClient } from '../scripts/index.js';
import { recordEntrySchema, type SeqEntry } from './entries.js';

/** Parses one stored entry; throws RecordError naming the seq on failure. */
export function parseEntry(seq: number, json: string): SeqEntry {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (cause) {
    throw new RecordError(`record entry ${seq} is not JSON`, { cause });
  }
  const parsed = recordEntrySchema.safeParse(raw);
  if (!parsed.success) {
    const kind = typeof raw === 'object' && raw && 'kind' in raw ? String((raw as { kind: unknown }).kind) : '?';
    throw new RecordError(`record entry ${seq} (kind ${kind}) cannot be read by this build: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  }
  return { ...parsed.data, seq };
}

type StreamReply = Array<[string, string[]]>;

function toEntries(reply: StreamReply): SeqEntry[] {
  return reply.map(([id, fields]) => {
    const seq = Number(id.slice(0, id.indexOf('-')));
    const i = fields.indexOf('e');
    if (i < 0 || fields[i + 1] === undefined) throw new RecordError(`record entry ${seq} has no body`);
    return parseEntry(seq, fields[i + 1]!);
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

/** Reads entries after `afterSeq` in pages of `pageSize`, yielding each page. */
export async function* readAfter(client: RedisClient, logKey: string, afterSeq: number, pageSize = 500): AsyncGenerator<SeqEntry[]> {
  let from = afterSeq + 1;
  for (;;) {
    const page = await readRange(client, logKey, { fromSeq: from, count: pageSize });
    if (page.length === 0) return;
    yield page;
    if (page.length < pageSize) return;
    from = page[page.length - 1]!.seq + 1;
  }
}

/** Reads the entries with the given seqs (missing ones are a RecordError), in one round trip. */
export async function readSeqs(client: RedisClient, logKey: string, seqs: number[]): Promise<SeqEntry[]> {
  if (seqs.length === 0) return [];
  const pipeline = client.pipeline();
  for (const s of seqs) pipeline.xrange(logKey, `${s}-0`, `${s}-0`);
  const results = (await pipeline.exec()) ?? [];
  return results.map(([err, reply], i) => {
    if (err) throw err;
    const rows = reply as StreamReply;
    if (rows.length === 0) throw new RecordError(`record entry ${seqs[i]} is missing`);
    return toEntries(rows)[0]!;
  });
}
