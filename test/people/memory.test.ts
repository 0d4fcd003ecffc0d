/** The memory store: notes per identity, bounded in count and size (refusals write nothing), keyword and embedding search, a stable prompt selection. */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError, MemoryLimitError } from '../../src/errors.js';
import { type MemoryEmbedder, MemoryStore, memoryKeys, selectPromptNotes } from '../../src/people/memory.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
let clock: number;
const store = (o: Partial<ConstructorParameters<typeof MemoryStore>[0]> = {}) =>
  new MemoryStore({ redis, prefix, now: () => clock++, limits: { maxNotes: 5, maxNoteChars: 40 }, ...o });

beforeEach(() => {
  prefix = testPrefix();
  clock = 1_700_000_000_000;
});
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

/** The commands on this test's memory keys while `fn` runs, from MONITOR (other test files share this Redis). */
async function commandsOn(fn: () => Promise<unknown>): Promise<string[][]> {
  // A connection of its own, made here rather than by `redis.monitor()`: ioredis takes the connection for a monitor
  // a tick after MONITOR's OK, so lines arriving with the OK (other files keep this Redis busy) reach it as replies
  // nobody asked for, an 'error' event that `monitor()` leaves without a listener; so do lines still in flight when
  // it disconnects. Both fall outside `fn`; an error while it watches fails the test.
  const monitor = redis.duplicate({ monitor: true, lazyConnect: false });
  let watching = false;
  let failed: unknown;
  monitor.on('error', (err: unknown) => {
    if (watching) failed ??= err;
  });
  const seen: string[][] = [];
  monitor.on('monitor', (_time: string, args: string[]) => seen.push(args));
  const marker = `${prefix}:done-${Date.now()}`;
  try {
    await new Promise((resolve) => monitor.once('monitoring', resolve));
    watching = true;
    await fn();
    await redis.ping(marker);
    await expect.poll(() => failed !== undefined || seen.some((a) => a[1] === marker)).toBe(true);
    if (failed !== undefined) throw failed;
  } finally {
    watching = false;
    monitor.disconnect();
  }
  return seen.filter((a) => a.slice(1).some((x) => x.startsWith(`${prefix}:{`)));
}

/** The current value of `steerbot_memory_writes_total{kind}`. */
const writes = async (kind: string) =>
  (await metrics.registry.getSingleMetric('steerbot_memory_writes_total')?.get())?.values.find((v) => v.labels.kind === kind)?.value ?? 0;

const keysNow = async () => (await redis.keys(`${prefix}:*`)).sort();
const ME = 'telegram:42';

describe('memory store', () => {
  it('saves notes with increasing ids under the identity hash tag and lists them oldest first', async () => {
    const m = store();
    const a = await m.save(ME, '  likes green tea ');
    const b = await m.save(ME, 'lives in Lyon');
    expect(a).toMatchObject({ kind: 'created', note: { id: '1', text: 'likes green tea' } });
    expect(b.note.id).toBe('2');
    expect((await m.list(ME)).map((n) => n.text)).toEqual(['likes green tea', 'lives in Lyon']);
    expect(await keysNow()).toEqual([`${prefix}:{i:${ME}}:memory`, `${prefix}:{i:${ME}}:memory_seq`]);
    // Another identity sees none of it.
    expect(await m.list('discord:7')).toEqual([]);
  });

  it('stores the same text once (a tool call run again saves once)', async () => {
    const m = store();
    await m.save(ME, 'likes green tea');
    const again = await m.save(ME, 'likes green tea');
    expect(again).toMatchObject({ kind: 'same', note: { id: '1' } });
    expect(await m.list(ME)).toHaveLength(1);
  });

  it('refuses a note over the size limit and writes nothing', async () => {
    const m = store();
    const refusedBefore = await writes('refused');
    const err = await m.save(ME, 'x'.repeat(41)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryLimitError);
    expect((err as MemoryLimitError).limit).toBe('size');
    expect((err as MemoryLimitError).code).toBe('MEMORY_LIMIT');
    expect(await keysNow()).toEqual([]);
    expect(await writes('refused')).toBe(refusedBefore + 1);
    await expect(m.save(ME, '   ')).rejects.toBeInstanceOf(InvalidInputError);
    expect(await keysNow()).toEqual([]);
  });

  it('refuses a note past the count limit and writes nothing', async () => {
    const m = store();
    for (let i = 0; i < 5; i++) await m.save(ME, `note ${i}`);
    const before = await redis.hgetall(memoryKeys(prefix, ME).notes);
    const err = await m.save(ME, 'one too many').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemoryLimitError);
    expect((err as MemoryLimitError).limit).toBe('count');
    expect(await redis.hgetall(memoryKeys(prefix, ME).notes)).toEqual(before);
    expect(await redis.get(memoryKeys(prefix, ME).seq)).toBe('5');
    // Editing a note is not a new one: allowed at the limit.
    expect((await m.save(ME, 'edited', { id: '3' })).kind).toBe('updated');
  });

  it('gives the last place to exactly one of many concurrent saves', async () => {
    const clients = Array.from({ length: 8 }, () => new Redis(redisUrl()));
    try {
      const m = store();
      for (let i = 0; i < 4; i++) await m.save(ME, `note ${i}`);
      const results = await Promise.allSettled(clients.map((c, i) => new MemoryStore({ redis: c, prefix, limits: { maxNotes: 5 } }).save(ME, `racer ${i}`)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof MemoryLimitError)).toHaveLength(7);
      expect(await m.list(ME)).toHaveLength(5);
    } finally {
      await Promise.all(clients.map((c) => c.quit()));
    }
  });

  it('edits a note in place, keeping its id and creation time; an unknown id writes nothing', async () => {
    const m = store();
    const { note } = await m.save(ME, 'likes tea');
    const edited = await m.save(ME, 'likes coffee', { id: note.id });
    expect(edited.note).toMatchObject({ id: note.id, text: 'likes coffee', createdAt: note.createdAt });
    expect(edited.note.updatedAt).toBeGreaterThan(note.updatedAt);
    await expect(m.save(ME, 'ghost', { id: '99' })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(m.save(ME, 'bad', { id: 'x y' })).rejects.toBeInstanceOf(InvalidInputError);
    expect((await m.list(ME)).map((n) => n.text)).toEqual(['likes coffee']);
  });

  it('deletes one note, all notes (ids not reused), and purges everything', async () => {
    const m = store();
    const deletedBefore = await writes('deleted');
    await m.save(ME, 'a1');
    await m.save(ME, 'b2');
    expect(await m.delete(ME, '1')).toBe(true);
    expect(await m.delete(ME, '1')).toBe(false);
    expect(await m.deleteAll(ME)).toBe(1);
    expect(await m.list(ME)).toEqual([]);
    expect(await writes('deleted')).toBe(deletedBefore + 2);
    expect((await m.save(ME, 'c3')).note.id).toBe('3');
    await m.purge(ME);
    expect(await keysNow()).toEqual([]);
  });

  it('merges a linked identity: its notes move, duplicates once, up to the limit', async () => {
    const m = store();
    await m.save(ME, 'shared');
    await m.save('discord:7', 'shared');
    await m.save('discord:7', 'from discord');
    expect(await m.merge('discord:7', ME)).toBe(1);
    expect((await m.list(ME)).map((n) => n.text)).toEqual(['shared', 'from discord']);
    expect(await m.list('discord:7')).toEqual([]);
  });

  it('merges notes with their stored embeddings, embedding nothing again', async () => {
    const calls: string[][] = [];
    const embed = async (texts: string[]) => {
      calls.push(texts);
      return texts.map((t) => [t.length, 1]);
    };
    const m = store({ embedder: { embed } });
    await m.save('discord:7', 'likes tea');
    await m.save('discord:7', 'lives in Oslo');
    const raw = async (identity: string) => {
      const k = memoryKeys(prefix, identity);
      const vectors = await redis.hgetall(k.vectors);
      return Object.values(await redis.hgetall(k.notes)).map((j) => {
        const n = JSON.parse(j) as { id: string; text: string };
        return { text: n.text, embedding: vectors[n.id] };
      });
    };
    const before = await raw('discord:7');
    expect(before.every((n) => n.embedding)).toBe(true);
    expect(await m.merge('discord:7', ME)).toBe(2);
    expect(calls).toHaveLength(2);
    const after = await raw(ME);
    expect(after.map(({ text, embedding }) => ({ text, embedding })).sort((a, b) => a.text.localeCompare(b.text))).toEqual(
      before.map(({ text, embedding }) => ({ text, embedding })).sort((a, b) => a.text.localeCompare(b.text)),
    );
    // Search uses the moved vectors as they are.
    await m.search(ME, 'tea');
    expect(calls.at(-1)).toEqual(['tea']);
  });

  it("keeps embeddings beside the notes: a list reads no vectors, the notes' JSON holds none", async () => {
    const vector = (t: string) => Array.from({ length: 1536 }, (_, i) => Math.sin(i + t.length));
    const m = store({ limits: { maxNoteChars: 200, maxNotes: 10 }, embedder: { embed: async (texts) => texts.map(vector) } });
    for (let i = 0; i < 8; i++) await m.save(ME, `note number ${i}`);
    const k = memoryKeys(prefix, ME);
    expect(await redis.hlen(k.vectors)).toBe(8);
    const notes = await redis.hgetall(k.notes);
    expect(Object.values(notes).some((j) => 'embedding' in (JSON.parse(j) as object))).toBe(false);
    // 8 vectors of 1536 float32s are ~64 KB; the notes alone a few hundred bytes.
    expect(Object.entries(notes).flat().join('').length).toBeLessThan(1000);
    // A list touches the notes hash only.
    const mine = await commandsOn(async () => expect(await m.list(ME)).toHaveLength(8));
    expect(mine).toEqual([['hvals', k.notes]]);
    // A search with an embedder reads the notes and their vectors, each once, and writes nothing (every note has one).
    const searched = await commandsOn(async () => expect(await m.search(ME, 'note number 3')).not.toHaveLength(0));
    expect(searched).toEqual([
      ['hvals', k.notes],
      ['hgetall', k.vectors],
    ]);
  });

  it('leaves no vector behind: delete, delete all, purge and merge', async () => {
    const m = store({ embedder: { embed: async (texts) => texts.map((t) => [t.length, 1]) } });
    const k = memoryKeys(prefix, ME);
    await m.save(ME, 'a1');
    await m.save(ME, 'b22');
    expect(await m.delete(ME, '1')).toBe(true);
    expect(Object.keys(await redis.hgetall(k.vectors))).toEqual(['2']);
    expect(await m.deleteAll(ME)).toBe(1);
    expect(await redis.exists(k.vectors)).toBe(0);
    await m.save(ME, 'c333');
    await m.purge(ME);
    expect(await keysNow()).toEqual([]);
    await m.save('discord:7', 'from discord');
    expect(await m.merge('discord:7', ME)).toBe(1);
    expect(await redis.exists(...Object.values(memoryKeys(prefix, 'discord:7')))).toBe(0);
    expect(await redis.hlen(k.vectors)).toBe(1);
  });

  it("drops a note's vector when its text changes without a new one, keeps it for the same text", async () => {
    let up = true;
    const m = store({ embedder: { embed: async (texts) => (up ? texts.map((t) => [t.length, 1]) : Promise.reject(new Error('down'))) } });
    const k = memoryKeys(prefix, ME);
    await m.save(ME, 'likes tea');
    await m.save(ME, 'lives in Oslo');
    const teaVector = await redis.hget(k.vectors, '1');
    up = false;
    await m.save(ME, 'likes tea', { id: '1' });
    expect(await redis.hget(k.vectors, '1')).toBe(teaVector);
    await m.save(ME, 'likes coffee', { id: '1' });
    expect(await redis.hget(k.vectors, '1')).toBeNull();
    expect(await redis.hexists(k.vectors, '2')).toBe(1);
    // A new text with its vector replaces the old one.
    up = true;
    await m.save(ME, 'likes green coffee', { id: '1' });
    expect(await redis.hget(k.vectors, '1')).not.toBeNull();
    expect(await redis.hget(k.vectors, '1')).not.toBe(teaVector);
  });

  it('refuses identity ids that would break the hash tag', async () => {
    await expect(store().save('a{b', 'x')).rejects.toBeInstanceOf(InvalidInputError);
    expect(await keysNow()).toEqual([]);
  });
});

describe('memory search', () => {
  it('finds notes by keywords (word prefixes), best first, only matching ones', async () => {
    const m = store({ limits: { maxNoteChars: 200 } });
    await m.save(ME, 'Has two dogs named Rex and Bo');
    await m.save(ME, 'Allergic to peanuts');
    await m.save(ME, 'Prefers answers in French');
    const hits = await m.search(ME, 'what are the dog names?');
    expect(hits.map((h) => h.text)).toEqual(['Has two dogs named Rex and Bo']);
    expect(await m.search(ME, 'weather tomorrow')).toEqual([]);
  });

  it('blends in embedding similarity, embedding notes saved without one at their first search', async () => {
    const plainStore = store({ limits: { maxNoteChars: 200 } });
    await plainStore.save(ME, 'Allergic to peanuts');
    // A toy embedder: food words point one way, everything else the other.
    const calls: string[][] = [];
    const embedder: MemoryEmbedder = {
      async embed(texts) {
        calls.push(texts);
        return texts.map((t) => (/peanut|food|eat|lunch/i.test(t) ? [1, 0] : [0, 1]));
      },
    };
    const m = store({ limits: { maxNoteChars: 200 }, embedder });
    await m.save(ME, 'Works as a nurse');
    const hits = await m.search(ME, 'what should I cook for lunch?');
    expect(hits[0]?.text).toBe('Allergic to peanuts');
    // The note saved without an embedding was embedded once and stored.
    expect(calls).toEqual([['Works as a nurse'], ['what should I cook for lunch?', 'Allergic to peanuts']]);
    await m.search(ME, 'lunch');
    expect(calls.at(-1)).toEqual(['lunch']);
  });

  it('goes on without embeddings when the embedder fails: saves the note, searches by keywords, reports the failure', async () => {
    const failures: unknown[] = [];
    const m = store({
      limits: { maxNoteChars: 200 },
      embedder: { embed: async () => Promise.reject(new Error('provider down')) },
      onEmbedderError: (err) => failures.push(err),
    });
    expect((await m.save(ME, 'Allergic to peanuts')).kind).toBe('created');
    expect((await m.search(ME, 'peanuts')).map((h) => h.text)).toEqual(['Allergic to peanuts']);
    expect(failures).toHaveLength(2);
  });
});

describe('memory prompt selection', () => {
  const note = (id: number, text: string, updatedAt = id) => ({ id: String(id), text, createdAt: id, updatedAt });

  it('takes the most recently changed notes that fit, shown in creation order', () => {
    const notes = [note(1, 'a'.repeat(10), 50), note(2, 'b'.repeat(10)), note(3, 'c'.repeat(30)), note(4, 'd'.repeat(5))];
    expect(selectPromptNotes(notes, { promptNotes: 3, promptChars: 25 }).map((n) => n.id)).toEqual(['1', '2', '4']);
    expect(selectPromptNotes(notes, { promptNotes: 2, promptChars: 1000 }).map((n) => n.id)).toEqual(['1', '4']);
  });

  it('is the same selection for the same notes, in any order read', () => {
    const notes = [note(1, 'x'), note(2, 'y'), note(3, 'z')];
    const a = selectPromptNotes(notes, { promptNotes: 2, promptChars: 100 });
    const b = selectPromptNotes([...notes].reverse(), { promptNotes: 2, promptChars: 100 });
    expect(b).toEqual(a);
  });
});
