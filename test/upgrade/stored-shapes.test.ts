/**
 * Rolling upgrades: what one release stored, the next reads. The golden dumps
 * in test/fixtures/stored/ are what each release's own code wrote
 * (`write.ts`): this build reads every shape of each of them, answers a new
 * message in that conversation, and skips (never refuses, never deletes) what
 * a newer release writes. A shape this build writes differently from its own
 * dump fails the last test: refresh the dump, and bump the shape's version
 * (with an upcaster) unless the change only adds an optional field.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RecordError } from '../../src/errors.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore } from '../../src/people/memory.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { recordSend } from '../../src/protocol/send.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { Schedules } from '../../src/schedules/schedules.js';
import { cleanupPrefix, defaultRedisUrl, testPrefix } from '../../testing/redis.js';
import { type DumpedKey, dumpPrefix, GOLDEN, type StoredDump, writeGolden } from '../fixtures/stored/write.js';
import { CID, fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';

const DIR = fileURLToPath(new URL('../fixtures/stored/', import.meta.url));
const DUMPS = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(`${DIR}${f}`, 'utf8')) as StoredDump);

/** Writes `dump` under `prefix`, its conversation renamed to `conversationId`. */
async function load(redis: Redis, dump: StoredDump, prefix: string, conversationId: string): Promise<void> {
  const keys = JSON.parse(JSON.stringify(dump.keys).replaceAll(GOLDEN.conversationId, conversationId)) as DumpedKey[];
  for (const k of keys) {
    const name = k.key.replace('<p>', prefix);
    if (k.type === 'string') await redis.set(name, k.value);
    else if (k.type === 'hash') await redis.hset(name, k.value);
    else if (k.type === 'set') await redis.sadd(name, ...k.value);
    else if (k.type === 'zset') await redis.zadd(name, ...k.value.flatMap(([m, s]) => [s, m]));
    else if (k.type === 'list') await redis.rpush(name, ...k.value);
    else for (const [id, fields] of k.value) await redis.xadd(name, id, ...fields);
  }
}

/** Appends a raw entry the way the scripts do (the next seq from `meta`), as a newer release would write it. */
async function appendRaw(redis: Redis, prefix: string, conversationId: string, entry: object): Promise<number> {
  const k = conversationKeys(prefix, conversationId);
  const seq = await redis.hincrby(k.meta, 'seq', 1);
  await redis.xadd(k.log, `${seq}-0`, 'e', JSON.stringify(entry));
  return seq;
}

const SUMMARY = 'Ada asked about the weather.';

describe('stored shapes across releases', () => {
  const t = perTestModel();
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(defaultRedisUrl());
  });
  afterAll(() => redis.disconnect());

  it('has the dump of the previous release and of this one', () => {
    expect(DUMPS.map((d) => d.release).sort()).toEqual(['0.1.0', 'current']);
  });

  for (const dump of DUMPS) {
    it(`reads what release ${dump.release} stored, and answers in that conversation`, async () => {
      t.fake.script([{ text: 'Snow tomorrow, still.' }]);
      t.h = await RunnerHarness.start();
      await load(redis, dump, t.h.prefix, CID);
      const log = dump.keys.find((k) => k.key.endsWith(':log'));
      const entries = await t.h.record();
      expect(entries.map((e) => e.seq)).toEqual(log?.type === 'stream' ? log.value.map(([id]) => Number(id.split('-')[0])) : []);
      expect(new Set(entries.map((e) => e.kind))).toEqual(
        new Set([
          'message.received',
          'run.started',
          'tool.calls',
          'tool.started',
          'tool.completed',
          'model.step',
          'steering.queued',
          'steering.injected',
          'compaction',
          'run.ended',
          'message.sent',
        ]),
      );
      const schedules = new Schedules({
        client: redis,
        prefix: t.h.prefix,
        connection: redis,
        bullPrefix: bullPrefixFor(t.h.prefix),
        queueName: 'upgrade-test',
      });
      try {
        const [schedule] = await schedules.list(CID, 0);
        expect(schedule).toMatchObject({ conversationId: CID, prompt: 'morning brief', owner: GOLDEN.identity, when: { kind: 'cron', cron: '0 8 * * 1-5' } });
        expect(schedule).not.toHaveProperty('v');
      } finally {
        await schedules.queue.close();
      }
      const notes = await new MemoryStore({ redis, prefix: t.h.prefix }).list(GOLDEN.identity);
      expect(notes.map((n) => n.text)).toEqual(['prefers Celsius']);
      expect(await new IdentityStore({ redis, prefix: t.h.prefix }).resolveAccount(GOLDEN.linked)).toBe(GOLDEN.identity);
      // The API send it recorded is that key's, for this build too: a retry is not recorded a second time.
      const sent = entries.find((e) => e.kind === 'message.sent');
      const retry = { conversationId: CID, text: 'Reminder: umbrella.', idempotencyKey: 'golden-send-1' };
      const opts = { client: redis, prefix: t.h.prefix, dedupeTtlSeconds: 86_400, lockMs: 30_000, known: true, caller: { token: 'ops' } };
      const again = await recordSend(retry, opts);
      // Busy when the dump holds the key's send lock too (its own release's layout).
      expect(['duplicate', 'busy']).toContain(again.kind);
      expect(again).toMatchObject({ seq: sent?.seq });

      // This build's runner answers a new message there, its prompt starting from the stored checkpoint.
      await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }));
      const r = await t.h.ingest('and the day after?');
      expect(r.kind).toBe('new-run');
      await t.h.outbound.waitForMessages(1);
      expect(t.h.outbound.texts).toEqual(['Snow tomorrow, still.']);
      expect(JSON.stringify(t.fake.requests[0])).toContain(SUMMARY);
    });
  }

  it("keeps and skips a newer release's entries and documents, and still refuses a broken one", async () => {
    t.fake.script([{ text: 'Noted.' }]);
    t.h = await RunnerHarness.start();
    const { prefix } = t.h;
    await load(redis, DUMPS.find((d) => d.release === 'current')!, prefix, CID);
    const before = (await t.h.record()).length;
    const at = Date.now();
    const unknownKind = await appendRaw(redis, prefix, CID, { v: 1, kind: 'reaction.received', at, emoji: '👍' });
    const newerVersion = await appendRaw(redis, prefix, CID, { v: 2, kind: 'message.received', at, body: { text: 'shape of the future' } });
    const k = conversationKeys(prefix, CID);
    await redis.hset(k.schedules, 'sfuture000000', JSON.stringify({ v: 2, id: 'sfuture000000', plan: 'unknown to this build' }));
    await redis.hset(`${prefix}:{i:${GOLDEN.identity}}:memory`, '99', JSON.stringify({ v: 2, id: '99', body: 'a newer note shape' }));

    const entries = await t.h.record();
    expect(entries).toHaveLength(before);
    expect(entries.map((e) => e.seq)).not.toContain(unknownKind);
    expect(entries.map((e) => e.seq)).not.toContain(newerVersion);
    expect(await redis.xlen(k.log)).toBe(before + 2);
    const schedules = new Schedules({ client: redis, prefix, connection: redis, bullPrefix: bullPrefixFor(prefix), queueName: 'upgrade-test' });
    try {
      expect((await schedules.list(CID, 0)).map((s) => s.prompt)).toEqual(['morning brief']);
      expect(await schedules.get(CID, 'sfuture000000')).toBeUndefined();
      expect(await schedules.stored(CID, 'sfuture000000')).toBe(true);
    } finally {
      await schedules.queue.close();
    }
    expect((await new MemoryStore({ redis, prefix }).list(GOLDEN.identity)).map((n) => n.id)).toEqual(['1']);
    expect(await redis.hexists(`${prefix}:{i:${GOLDEN.identity}}:memory`, '99')).toBe(1);

    // A run over a record holding them answers, and leaves them in place.
    await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }));
    await t.h.ingest('one more thing');
    await t.h.outbound.waitForMessages(1);
    await t.h.idle();
    expect(JSON.stringify(t.fake.requests[0])).not.toContain('shape of the future');
    const raw = (await redis.xrange(k.log, `${unknownKind}-0`, `${newerVersion}-0`)).map(([, f]) => JSON.parse(f[1]!).kind);
    expect(raw).toEqual(['reaction.received', 'message.received']);

    // An entry of a kind and version this build knows, that does not match them, is corruption: refused.
    const broken = await appendRaw(redis, prefix, CID, { v: 1, kind: 'message.received', at, sender: { id: 'u1' } });
    await expect(readRange(redis, k.log, { fromSeq: broken })).rejects.toThrow(RecordError);
  });

  it('writes every shape as its dump shows it (a changed shape needs a new dump, and a version unless it only adds)', async () => {
    const prefix = testPrefix();
    try {
      await writeGolden(redis, prefix);
      const written = await dumpPrefix(redis, prefix, 'current');
      const current = DUMPS.find((d) => d.release === 'current')!;
      expect(signature(written)).toEqual(signature(current));
    } finally {
      await cleanupPrefix(redis, prefix);
      await cleanupPrefix(redis, bullPrefixFor(prefix));
    }
  });
});

/** Run, schedule and delivery ids, and times, vary between writes: the signature names them by role. */
const normalize = (s: string) =>
  s
    .replace(/\br[0-9a-z]{18,}/g, '<run>')
    .replace(/\bs[0-9a-z]{12}\b/g, '<schedule>')
    .replace(/\b(day|month|hour):[0-9T:-]+/g, '$1:<window>')
    // Usage counters by calendar day and month (`t:2026-12-06`, `t:2026-12`): the day the dump was written.
    .replace(/\bt:\d{4}-\d{2}-\d{2}\b/g, 't:<day>')
    .replace(/\bt:\d{4}-\d{2}\b/g, 't:<month>');

/** The shape of a JSON value: its paths and their types, not its values. */
function jsonShape(raw: string): string {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return 'text';
  }
  const paths: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (Array.isArray(v)) for (const x of v) walk(x, `${path}[]`);
    else if (v !== null && typeof v === 'object') for (const [key, x] of Object.entries(v)) walk(x, `${path}.${normalize(key)}`);
    else paths.push(`${path}:${v === null ? 'null' : typeof v}`);
  };
  walk(value, '');
  return [...new Set(paths)].sort().join(' ');
}

/** What a dump's shapes are: each key's type, hash fields, and the JSON shape of each value. */
function signature(dump: StoredDump): string[] {
  return dump.keys
    .flatMap((k) => {
      const key = `${normalize(k.key)} ${k.type}`;
      if (k.type === 'hash') return Object.entries(k.value).map(([f, v]) => `${key} ${normalize(f)} = ${jsonShape(v)}`);
      if (k.type === 'stream') return k.value.map(([, fields]) => `${key} ${fields[0]} = ${jsonShape(fields[1] ?? '')}`);
      if (k.type === 'string') return [`${key} = ${jsonShape(k.value)}`];
      return [`${key} (${k.value.length})`];
    })
    .sort();
}
