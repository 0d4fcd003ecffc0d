/**
 * Long-term memory per identity: short notes a person's agent saves with its
 * memory tools, or the person writes (`/forget`, the console), never taken
 * silently from messages. Notes follow the identity, so a linked person's
 * notes are recalled on every channel.
 *
 * Notes live in one hash per identity (`<p>:{i:<identity>}:memory`, note id →
 * JSON) with an id counter and a hash of embeddings beside it (`memory_vec`,
 * note id → vector: apart, so listing the notes reads no vectors): the
 * `{i:<identity>}` hash tag keeps them in one Cluster slot, and a save is one
 * script (`memory-save-3.lua`) that checks the count and writes in one step.
 * Counts and sizes are bounded (`memory.maxNotes`, `memory.maxNoteChars`); a
 * note over a limit is refused with MemoryLimitError and nothing is written.
 *
 * Search scores keywords; with an embedder (an embedding model configured)
 * it blends in the cosine similarity of the query's embedding and each
 * note's, computed at save time and stored beside the note (a note saved
 * without one is embedded at its first search).
 */
import { z } from 'zod';
import { InvalidInputError, MemoryLimitError } from '../errors.js';
import { parseJsonOrUndefined } from '../json.js';
import type { RedisClient } from '../redis/connection.js';
import { readStored, storedShape } from '../redis/stored.js';
import { runScript } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';
import { metrics } from '../telemetry/metrics.js';
import { assertIdentityId } from './identity.js';

/** One remembered note. */
export interface MemoryNote {
  /** Its id: a small number, unique per identity (`/forget <id>`). */
  id: string;
  /** The note, trimmed; at most `memory.maxNoteChars` characters. */
  text: string;
  /** When it was saved, ms since the epoch. */
  createdAt: number;
  /** When its text last changed, ms since the epoch. */
  updatedAt: number;
}

/** A note found by a search, with its score (higher is closer; 0-1). */
export interface MemoryHit extends MemoryNote {
  /** How well it matches: keywords, blended with embedding similarity when an embedder is set. */
  score: number;
}

/** What a save did: `created` a note, `updated` one, or found the `same` text stored already (nothing written). */
export interface MemorySaveResult {
  /** What was done. */
  kind: 'created' | 'updated' | 'same';
  /** The note as stored (for `same`: the one stored before). */
  note: MemoryNote;
}

/** Turns text into an embedding vector. Throws on a provider failure. */
export interface MemoryEmbedder {
  /** One vector per text, in order. */
  embed(texts: string[], signal?: AbortSignal): Promise<number[][]>;
}

/** The `memory` settings a store needs. */
export interface MemoryLimits {
  /** Most notes per identity. Default 200. */
  maxNotes: number;
  /** Most characters of one note. Default 1000. */
  maxNoteChars: number;
  /** Most notes in the prompt block. Default 20. */
  promptNotes: number;
  /** Most characters of the prompt block's notes together. Default 4000. */
  promptChars: number;
}

/** Options of `MemoryStore`. */
export interface MemoryStoreOptions {
  redis: RedisClient;
  /** Key prefix (config `redis.prefix`). Default `sb`. */
  prefix?: string;
  /** Limits. Default: `DEFAULT_MEMORY_LIMITS`. */
  limits?: Partial<MemoryLimits>;
  /** Embeds notes and queries; without it search is by keywords only. */
  embedder?: MemoryEmbedder;
  /** Told when the embedder fails; the save goes on without an embedding, the search by keywords. Must not throw. Default: none. */
  onEmbedderError?(err: unknown): void;
  /** The clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The default limits (`memory.*`). */
export const DEFAULT_MEMORY_LIMITS: MemoryLimits = { maxNotes: 200, maxNoteChars: 1000, promptNotes: 20, promptChars: 4000 };

/** Most results of one search. */
const MAX_SEARCH_RESULTS = 20;
/** Longest accepted embedding, in dimensions. */
const MAX_EMBEDDING_DIMS = 8192;
/** Weight of the embedding similarity in a blended score (the rest is keywords). */
const EMBEDDING_WEIGHT = 0.7;

/** The memory keys of an identity (one hash tag: one Cluster slot): notes, id counter, embeddings. */
export interface MemoryKeys {
  notes: string;
  seq: string;
  vectors: string;
}

/** The memory keys of an identity (one hash tag: one Cluster slot). */
export function memoryKeys(prefix: string, identity: string): MemoryKeys {
  assertIdentityId(identity);
  const base = `${prefix}:{i:${identity}}:`;
  return { notes: `${base}memory`, seq: `${base}memory_seq`, vectors: `${base}memory_vec` };
}

/** A note as stored (JSON in the identity's `memory` hash, written by `memory-save-3.lua`), versioned for rolling upgrades. */
const storedNote = storedShape<MemoryNote>({
  name: 'memory note',
  version: 1,
  field: 'v',
  schema: z.object({ id: z.string(), text: z.string(), createdAt: z.number(), updatedAt: z.number() }),
});

/** Creation order: oldest first, then by id. */
const byCreation = (a: MemoryNote, b: MemoryNote) => a.createdAt - b.createdAt || Number(a.id) - Number(b.id);

/** Saves, lists, searches and deletes an identity's notes. Holds no state besides its options. */
export class MemoryStore {
  readonly limits: MemoryLimits;
  private readonly now: () => number;

  constructor(private readonly o: MemoryStoreOptions) {
    this.limits = { ...DEFAULT_MEMORY_LIMITS, ...o.limits };
    this.now = o.now ?? Date.now;
  }

  /** Whether search blends in embeddings. */
  get embeds(): boolean {
    return this.o.embedder !== undefined;
  }

  /**
   * Saves `text` as a new note, or as the new text of note `id`. The text is
   * trimmed. Throws MemoryLimitError over a limit, InvalidInputError for an
   * empty text or an unknown `id`; nothing is written then.
   */
  async save(identity: string, text: string, opts: { id?: string; signal?: AbortSignal } = {}): Promise<MemorySaveResult> {
    const k = memoryKeys(this.prefix, identity);
    const body = this.checkText(text);
    if (opts.id !== undefined) assertNoteId(opts.id);
    return this.write(k, body, opts.id ?? '', await this.embedding(body, opts.signal));
  }

  /** Every note of an identity, oldest first (no embeddings are read). */
  async list(identity: string): Promise<MemoryNote[]> {
    const all = await this.o.redis.hvals(memoryKeys(this.prefix, identity).notes);
    return all
      .map(parseNote)
      .filter((n) => n !== undefined)
      .sort(byCreation);
  }

  /**
   * Notes matching `query`, best first, at most `limit` (default 5, at most
   * 20): by keywords, blended with embedding similarity when an embedder is
   * set. Keyword-only search returns only notes sharing a word with the query.
   */
  async search(identity: string, query: string, opts: { limit?: number; signal?: AbortSignal } = {}): Promise<MemoryHit[]> {
    const limit = Math.max(1, Math.min(opts.limit ?? 5, MAX_SEARCH_RESULTS));
    // With an embedder, the notes and their embeddings are read in one round trip (one slot, sent together).
    const [notes, stored] = await Promise.all([
      this.list(identity),
      this.o.embedder ? this.o.redis.hgetall(memoryKeys(this.prefix, identity).vectors) : undefined,
    ]);
    if (notes.length === 0) return [];
    const terms = words(query);
    const vectors = stored
      ? await this.vectors(identity, query, notes, stored, opts.signal).catch((err: unknown) => this.embedFailed(err, opts.signal))
      : undefined;
    const hits = notes.map((n, i) => {
      const kw = keywordScore(terms, n.text);
      const score = vectors ? EMBEDDING_WEIGHT * Math.max(0, cosine(vectors.query, vectors.notes[i]!)) + (1 - EMBEDDING_WEIGHT) * kw : kw;
      return { ...n, score };
    });
    return hits
      .filter((h) => h.score > 0)
      .sort((a, b) => b.score - a.score || b.updatedAt - a.updatedAt)
      .slice(0, limit);
  }

  /** Deletes note `id`; false when there was none. */
  async delete(identity: string, id: string): Promise<boolean> {
    assertNoteId(id);
    const k = memoryKeys(this.prefix, identity);
    const [[, n]] = (await this.o.redis.multi().hdel(k.notes, id).hdel(k.vectors, id).exec()) as [[unknown, number], unknown];
    const deleted = Number(n) === 1;
    if (deleted) metrics.memoryWrites.inc({ kind: 'deleted' });
    return deleted;
  }

  /** Deletes every note of an identity (ids are not reused); returns how many there were. */
  async deleteAll(identity: string): Promise<number> {
    const k = memoryKeys(this.prefix, identity);
    const [[, count]] = (await this.o.redis.multi().hlen(k.notes).del(k.notes, k.vectors).exec()) as [[unknown, number], unknown];
    if (Number(count) > 0) metrics.memoryWrites.inc({ kind: 'deleted' }, Number(count));
    return Number(count);
  }

  /** Deletes an identity's memory, notes, embeddings and id counter (purge of a person). */
  async purge(identity: string): Promise<void> {
    const k = memoryKeys(this.prefix, identity);
    await this.o.redis.del(k.notes, k.seq, k.vectors);
  }

  /**
   * Moves the notes of identity `from` into `into` (a link merged them),
   * oldest first, as far as `into` has room; then deletes `from`'s memory.
   * Two slots, so not one step: a note saved to `from` meanwhile is lost
   * with it (its accounts already resolve to `into`). A note keeps its
   * embedding (none is computed); `from`'s embeddings go with its notes.
   * Returns how many moved.
   */
  async merge(from: string, into: string): Promise<number> {
    const k = memoryKeys(this.prefix, into);
    const [notes, vectors] = await Promise.all([this.list(from), this.o.redis.hgetall(memoryKeys(this.prefix, from).vectors)]);
    let moved = 0;
    for (const note of notes) {
      try {
        if ((await this.write(k, this.checkText(note.text), '', vectors[note.id])).kind === 'created') moved++;
      } catch (err) {
        if (!(err instanceof MemoryLimitError)) throw err;
        break;
      }
    }
    await this.purge(from);
    return moved;
  }

  private get prefix(): string {
    return this.o.prefix ?? 'sb';
  }

  /** The trimmed text; throws MemoryLimitError or InvalidInputError (empty). */
  private checkText(text: string): string {
    const body = typeof text === 'string' ? text.trim() : '';
    if (body === '') throw new InvalidInputError('a note needs some text');
    if (body.length > this.limits.maxNoteChars) {
      metrics.memoryWrites.inc({ kind: 'refused' });
      throw new MemoryLimitError('size', `a note has at most ${this.limits.maxNoteChars} characters (this one has ${body.length})`);
    }
    return body;
  }

  /** Runs the save script: a new note (`id` '') or note `id`'s new text, checked `body`, with its `embedding` if any. */
  private async write(k: MemoryKeys, body: string, id: string, embedding: string | undefined): Promise<MemorySaveResult> {
    const r = checkReply(
      'memory-save',
      await runScript(this.o.redis, 'memory-save', [k.notes, k.seq, k.vectors], [id, body, this.now(), this.limits.maxNotes, embedding ?? '']),
    );
    if (r[0] === 'limit') {
      metrics.memoryWrites.inc({ kind: 'refused' });
      throw new MemoryLimitError('count', `memory is full: ${r[1]} notes (at most ${this.limits.maxNotes}); delete one first`);
    }
    if (r[0] === 'not_found') throw new InvalidInputError(`no note ${id} to edit`);
    const note = parseNote(String(r[2]));
    if (!note) throw new InvalidInputError('memory-save: unreadable note');
    const kind = r[0] as MemorySaveResult['kind'];
    metrics.memoryWrites.inc({ kind });
    return { kind, note };
  }

  private async embedding(text: string, signal: AbortSignal | undefined): Promise<string | undefined> {
    if (!this.o.embedder) return undefined;
    try {
      const [v] = await this.o.embedder.embed([text], signal);
      return v ? encodeVector(v) : undefined;
    } catch (err) {
      // Saved without one, the note is embedded at its first search.
      return this.embedFailed(err, signal);
    }
  }

  /** An embedder failure is reported and worked around (undefined); an abort is rethrown. */
  private embedFailed(err: unknown, signal: AbortSignal | undefined): undefined {
    if (signal?.aborted) throw err;
    this.o.onEmbedderError?.(err);
    return undefined;
  }

  /** The query's vector and every note's (`embeddings`: the embeddings hash as read); notes saved without one are embedded now and the vector stored. */
  private async vectors(identity: string, query: string, notes: MemoryNote[], embeddings: Record<string, string>, signal: AbortSignal | undefined) {
    const k = memoryKeys(this.prefix, identity);
    const stored = notes.map((n) => decodeVector(embeddings[n.id]));
    const missing = notes.map((n, i) => ({ n, i })).filter(({ i }) => stored[i] === undefined);
    const fresh = await this.o.embedder!.embed([query, ...missing.map(({ n }) => n.text)], signal);
    await Promise.all(
      missing.map(({ n, i }, j) => {
        const v = fresh[j + 1];
        if (!v) return undefined;
        stored[i] = v;
        return runScript(this.o.redis, 'memory-embed', [k.notes, k.vectors], [n.id, n.updatedAt, encodeVector(v)]);
      }),
    );
    return { query: fresh[0] ?? [], notes: stored.map((v) => v ?? []) };
  }
}

/**
 * The notes of the prompt block: the most recently saved or edited notes
 * that fit in `promptNotes` and `promptChars`, shown oldest first. It
 * depends on the notes alone (not on the conversation or the query), so
 * the system prompt it goes into stays byte-identical until a note changes.
 */
export function selectPromptNotes(notes: readonly MemoryNote[], limits: Pick<MemoryLimits, 'promptNotes' | 'promptChars'>): MemoryNote[] {
  const newest = [...notes].sort((a, b) => b.updatedAt - a.updatedAt || Number(b.id) - Number(a.id));
  const chosen: MemoryNote[] = [];
  let chars = 0;
  for (const n of newest) {
    if (chosen.length >= limits.promptNotes) break;
    if (chars + n.text.length > limits.promptChars) continue;
    chars += n.text.length;
    chosen.push(n);
  }
  return chosen.sort(byCreation);
}

// Note ids are the counter's numbers.
const NOTE_ID_RE = /^[1-9][0-9]{0,15}$/;

function assertNoteId(id: string): void {
  if (typeof id !== 'string' || !NOTE_ID_RE.test(id)) throw new InvalidInputError('a note id is a number, e.g. 3');
}

/** A stored note; undefined when it is broken or a newer release wrote it (left in place either way). */
function parseNote(raw: string): MemoryNote | undefined {
  const r = readStored(storedNote, parseJsonOrUndefined(raw));
  return r.kind === 'ok' ? r.value : undefined;
}

/** Lower-case words of at least two letters or digits, each once. */
function words(text: string): string[] {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [])];
}

/** The share of `terms` found in `text` (a term matches a word it starts: `dog` finds `dogs`). */
function keywordScore(terms: readonly string[], text: string): number {
  if (terms.length === 0) return 0;
  const have = words(text);
  const found = terms.filter((t) => have.some((w) => w.startsWith(t))).length;
  return found / terms.length;
}

function cosine(a: readonly number[], b: readonly number[]): number {
  if (a.length === 0 || a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Base64 of the vector's float32s: a quarter of the JSON size. */
function encodeVector(v: readonly number[]): string {
  if (v.length === 0 || v.length > MAX_EMBEDDING_DIMS) throw new InvalidInputError(`an embedding has 1-${MAX_EMBEDDING_DIMS} dimensions (got ${v.length})`);
  return Buffer.from(new Float32Array(v).buffer).toString('base64');
}

function decodeVector(s: string | undefined): number[] | undefined {
  if (!s) return undefined;
  const buf = Buffer.from(s, 'base64');
  if (buf.length === 0 || buf.length % 4 !== 0) return undefined;
  // A copy: a small decoded Buffer may sit at an offset of a shared pool that is not a multiple of 4.
  return Array.from(new Float32Array(new Uint8Array(buf).buffer));
}
