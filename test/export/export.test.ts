/**
 * The export documents against a real Redis: a conversation's (record as
 * stored, in seq order, runs summary, state, counters, schedules, approvals,
 * artifacts, a direct chat's person and notes), a person's (accounts,
 * approval, memory, counters, owned schedules, the conversations they wrote
 * in, whole or only their own entries), unknown and purged ids, and a
 * 100 000-entry record streamed a page at a time, never read ahead of the writer.
 */
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exportParts } from '../../app/features/index.js';
import { InvalidInputError, RecordError } from '../../src/errors.js';
import { Exporter, type ExportOpening } from '../../src/export/exporter.js';
import { writeChunks } from '../../src/export/json-stream.js';
import { Budgets } from '../../src/people/budget.js';
import { ConversationIndex } from '../../src/people/conversation-index.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore } from '../../src/people/memory.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { conversationKeys, peopleKeys } from '../../src/redis/keys.js';
import { ownerIndexKey } from '../../src/schedules/schedules.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const redis = new Redis(redisUrl());
let prefix: string;
beforeEach(() => {
  prefix = testPrefix();
});
afterEach(() => cleanupPrefix(redis, prefix));
afterAll(() => redis.quit());

const AT = Date.UTC(2026, 0, 15, 10);
const msg = (sender: string, text: string, extra: Record<string, unknown> = {}) => ({
  v: 1,
  kind: 'message.received',
  at: AT,
  updateKey: `telegram:${text}`,
  sender: { id: sender, name: `user ${sender}` },
  text,
  ...extra,
});
const started = (run: string, attempt = 1) => ({ v: 1, kind: 'run.started', at: AT + 1, run, attempt, token: attempt, owner: 'runner-1', inputs: [1] });
const step = (run: string, text: string) => ({
  v: 1,
  kind: 'model.step',
  at: AT + 2,
  run,
  token: 1,
  step: 0,
  messages: [{ role: 'assistant', content: text }],
  usage: { inputTokens: 100, outputTokens: 20 },
});
const ended = (run: string) => ({ v: 1, kind: 'run.ended', at: AT + 3, run, attempt: 1, token: 1, outcome: 'completed' });

/** Appends `entries` to the conversation's record as seqs 1, 2, … (as ingest and append store them). */
async function record(conversationId: string, entries: readonly unknown[]): Promise<void> {
  const log = conversationKeys(prefix, conversationId).log;
  const p = redis.pipeline();
  entries.forEach((e, i) => void p.xadd(log, `${i + 1}-0`, 'e', JSON.stringify(e)));
  await p.exec();
}

const exporter = (o: { channels?: string[]; pageSize?: number; redis?: RedisClient } = {}) =>
  new Exporter({
    redis: o.redis ?? redis,
    prefix,
    channels: o.channels ?? ['telegram', 'discord'],
    parts: exportParts({ redis: o.redis ?? redis, prefix }),
    now: () => AT,
    ...(o.pageSize && { pageSize: o.pageSize }),
  });

async function text(opening: ExportOpening): Promise<string> {
  if (opening.kind !== 'found') throw new Error(`expected a document, got ${opening.kind}`);
  let out = '';
  for await (const chunk of opening.chunks) out += chunk;
  return out;
}
const doc = async (opening: ExportOpening): Promise<any> => JSON.parse(await text(opening));

describe('a conversation export', () => {
  it('holds the record as stored in seq order, a runs summary, state, counters, schedules, approvals, artifacts and the person of a direct chat', async () => {
    const id = 'telegram:1';
    const entries = [msg('1', 'hello'), started('run_a1'), step('run_a1', 'hi there'), ended('run_a1'), msg('1', 'thanks')];
    await record(id, entries);
    const k = conversationKeys(prefix, id);
    await redis.hset(k.state, 'runner.compaction.checkpoint', JSON.stringify({ summary: 'they said hello' }), 'plugin.note', 'plain text');
    await redis.hset(k.schedules, 's000000000001', JSON.stringify({ id: 's000000000001', prompt: 'water the plants', createdAt: AT }));
    await redis.hset(k.approvals, 'ap_1', JSON.stringify({ run: 'run_a1', tool: 'refund', text: 'Refund 10 EUR?', status: 'approved' }));
    await redis.hset(k.artifacts, 'art1', 'a large tool result');
    const budgets = new Budgets({ client: redis, prefix, settings: { conversation: { tokensPerDay: 1000 } }, now: () => AT });
    await budgets.charge({ conversationId: id }, 120);
    await new MemoryStore({ redis, prefix }).save('telegram:1', 'likes tea');

    const d = await doc(await exporter().conversation(id));
    expect(d).toMatchObject({ format: 'steerbot.export', version: 1, exportedAt: new Date(AT).toISOString(), conversation: id });
    expect(d.record).toEqual(entries.map((e, i) => ({ seq: i + 1, ...e })));
    expect(d.runs).toEqual([
      { run: 'run_a1', attempts: 1, startedAt: AT + 1, endedAt: AT + 3, outcome: 'completed', steps: 1, inputTokens: 100, outputTokens: 20 },
    ]);
    expect(d.state).toEqual({ 'runner.compaction.checkpoint': { summary: 'they said hello' }, 'plugin.note': 'plain text' });
    expect(d.usage).toEqual({ tokens: { '2026-01-15': 120, '2026-01': 120 }, runs: {}, notices: {} });
    expect(d.schedules).toEqual([{ id: 's000000000001', prompt: 'water the plants', createdAt: AT }]);
    expect(d.approvals).toEqual([{ id: 'ap_1', run: 'run_a1', tool: 'refund', text: 'Refund 10 EUR?', status: 'approved' }]);
    expect(d.artifacts).toEqual([{ id: 'art1', text: 'a large tool result' }]);
    expect(d.memoryOf).toBe('telegram:1');
    expect(d.memory.map((n: { text: string }) => n.text)).toEqual(['likes tea']);
  });

  it('names no person in a group chat, nor where several people wrote', async () => {
    await new MemoryStore({ redis, prefix }).save('telegram:1', 'likes tea');
    await record('telegram:-100', [msg('1', 'hi all', { group: true })]);
    await record('telegram:7', [msg('1', 'hi'), msg('2', 'me too')]);
    for (const id of ['telegram:-100', 'telegram:7']) {
      const d = await doc(await exporter().conversation(id));
      expect(d.memoryOf).toBeNull();
      expect(d.memory).toEqual([]);
    }
  });

  it('writes an entry of a newer release as stored, and stops at a broken entry rather than leave it out', async () => {
    const newer = { v: 9, kind: 'message.received', at: AT, shape: 'of a later release' };
    await record('telegram:1', [msg('1', 'hello'), newer]);
    expect((await doc(await exporter().conversation('telegram:1'))).record).toEqual([
      { seq: 1, ...msg('1', 'hello') },
      { seq: 2, ...newer },
    ]);
    await record('telegram:2', [msg('2', 'hello'), { v: 1, kind: 'message.received', at: AT, text: 'no sender' }]);
    await expect(text(await exporter().conversation('telegram:2'))).rejects.toThrow(RecordError);
  });

  it('finds nothing for an unknown conversation, says so for a purged one, and refuses a bad id', async () => {
    expect(await exporter().conversation('telegram:404')).toEqual({ kind: 'not_found' });
    await record('telegram:1', [msg('1', 'hello')]);
    expect((await purgeConversation(redis, prefix, 'telegram:1')).kind).toBe('purged');
    expect(await exporter().conversation('telegram:1')).toEqual({ kind: 'purged' });
    await expect(exporter().conversation('a {b}')).rejects.toThrow(InvalidInputError);
  });

  it('streams a 100 000-entry record a page at a time, never reading ahead of the writer', async () => {
    const id = 'telegram:1';
    const log = conversationKeys(prefix, id).log;
    const N = 100_000;
    for (let from = 0; from < N; from += 10_000) {
      const p = redis.pipeline();
      for (let i = from; i < from + 10_000; i++) p.xadd(log, `${i + 1}-0`, 'e', JSON.stringify(msg('1', `message number ${i + 1}`)));
      await p.exec();
    }
    // Counts the record reads the export makes, to compare with what the writer has taken.
    const counting = countingRecordReads(redis);
    const opening = await exporter({ redis: counting.client, pageSize: 500 }).conversation(id);
    if (opening.kind !== 'found') throw new Error(opening.kind);

    const pieces: string[] = [];
    let aheadBy = 0;
    // A slow writer with a small buffer: the export must wait for it (drain) rather than read on.
    const out = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _enc, done) {
        pieces.push(chunk.toString());
        aheadBy = Math.max(aheadBy, counting.reads - pieces.length);
        setImmediate(done);
      },
    });
    await writeChunks(opening.chunks, out);
    out.end();
    await once(out, 'finish');

    const whole = pieces.join('');
    expect(whole.length).toBeGreaterThan(10_000_000);
    expect(pieces.length).toBeGreaterThan(N / 500);
    // One page a piece: no piece holds more than a page of entries.
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(200_000);
    expect(counting.reads).toBe(N / 500 + 1);
    // The reader is at most the writer's buffer (a page or two) ahead of what the writer took.
    expect(aheadBy).toBeLessThanOrEqual(3);
    const d = JSON.parse(whole);
    expect(d.record).toHaveLength(N);
    expect(d.record.every((e: { seq: number }, i: number) => e.seq === i + 1)).toBe(true);
    expect(d.record[N - 1].text).toBe(`message number ${N}`);
  }, 120_000);
});

describe("a person's export", () => {
  it('stops reading when its writer goes away, also while it surveys who wrote in a long record', async () => {
    const log = conversationKeys(prefix, 'telegram:1').log;
    const N = 20_000;
    const p = redis.pipeline();
    for (let i = 0; i < N; i++) p.xadd(log, `${i + 1}-0`, 'e', JSON.stringify(msg('1', `message number ${i + 1}`)));
    await p.exec();
    await new ConversationIndex({ redis, prefix }).note('telegram', '1', 'telegram:1');
    const counting = countingRecordReads(redis);
    const opening = await exporter({ redis: counting.client, pageSize: 500 }).identity('telegram:1');
    if (opening.kind !== 'found') throw new Error(opening.kind);
    const pieces = opening.chunks[Symbol.asyncIterator]();
    let seen = '';
    while (!seen.includes('"conversations":[')) seen += (await pieces.next()).value as string;
    // The writer takes one more piece, then goes away (the client closed the download): the export reads no further.
    await pieces.next();
    await pieces.return?.(undefined);
    expect(counting.reads).toBeLessThanOrEqual(2);
  }, 60_000);

  /** Alice: telegram:1 with discord:11 linked in; Bob: telegram:2. Alice and Bob share a group; a Discord chat has a stranger's message too. */
  async function people() {
    const identities = new IdentityStore({ redis, prefix });
    await identities.link('discord:11', 'telegram:1');
    await redis.sadd(peopleKeys(prefix).paired, 'telegram:1');
    const index = new ConversationIndex({ redis, prefix });
    await record('telegram:1', [msg('1', 'alice direct'), started('run_a1'), step('run_a1', 'answer to alice'), ended('run_a1')]);
    await record('telegram:-100', [
      msg('1', 'alice in the group', { group: true }),
      msg('2', 'bob secret in the group', { group: true }),
      step('run_g1', 'answer that quotes bob'),
    ]);
    await record('telegram:2', [msg('2', 'bob direct')]);
    await record('discord:500', [msg('11', 'alice on discord'), msg('12', 'stranger on discord')]);
    await index.note('telegram', '1', 'telegram:1');
    await index.note('telegram', '1', 'telegram:-100');
    await index.note('discord', '11', 'discord:500');
    await index.note('telegram', '2', 'telegram:-100');
    await index.note('telegram', '2', 'telegram:2');
    await new MemoryStore({ redis, prefix }).save('telegram:1', 'likes tea');
    const budgets = new Budgets({ client: redis, prefix, settings: { identity: { tokensPerDay: 1000 } }, now: () => AT });
    await budgets.charge({ identity: 'telegram:1', conversationId: 'telegram:1' }, 120);
    const schedule = { id: 's000000000001', conversationId: 'telegram:1', prompt: 'water the plants', createdAt: AT, owner: 'telegram:1' };
    await redis.hset(conversationKeys(prefix, 'telegram:1').schedules, schedule.id, JSON.stringify(schedule));
    await redis.sadd(ownerIndexKey(prefix, 'telegram:1'), `${schedule.id}:telegram:1`);
    return { identities, schedule };
  }

  it('holds their accounts, approval, notes, counters, schedules and the conversations they wrote in', async () => {
    const { schedule } = await people();
    const d = await doc(await exporter().identity('telegram:1'));
    expect(d).toMatchObject({ format: 'steerbot.export', version: 1, identity: 'telegram:1', accounts: ['discord:11', 'telegram:1'], approved: true });
    expect(d.query).toBeUndefined();
    expect(d.memory.map((n: { text: string }) => n.text)).toEqual(['likes tea']);
    expect(d.usage.tokens).toEqual({ '2026-01-15': 120, '2026-01': 120 });
    expect(d.schedules).toEqual([schedule]);
    expect(d.conversations.map((c: { conversation: string }) => c.conversation)).toEqual(['discord:500', 'telegram:-100', 'telegram:1']);
    const [discord, group, direct] = d.conversations;
    expect(direct).toMatchObject({ conversation: 'telegram:1', accounts: ['telegram:1'], scope: 'full' });
    expect(direct.record.map((e: { kind: string }) => e.kind)).toEqual(['message.received', 'run.started', 'model.step', 'run.ended']);
    expect(direct.runs).toEqual([expect.objectContaining({ run: 'run_a1', outcome: 'completed' })]);
    expect(direct.schedules).toEqual([schedule]);
    expect(group).toEqual({
      conversation: 'telegram:-100',
      accounts: ['telegram:1'],
      scope: 'own-messages',
      reason: 'group',
      record: [{ seq: 1, ...msg('1', 'alice in the group', { group: true }) }],
    });
    expect(discord).toMatchObject({ scope: 'own-messages', reason: 'other-senders', record: [{ seq: 1, text: 'alice on discord' }] });
  });

  it("never holds another person's words or conversations, even from a group they share", async () => {
    await people();
    const all = await text(await exporter().identity('telegram:1'));
    for (const theirs of ['bob direct', 'bob secret in the group', 'answer that quotes bob', 'stranger on discord', 'telegram:2'])
      expect(all).not.toContain(theirs);
    const bob = await doc(await exporter().identity('telegram:2'));
    expect(bob.conversations.map((c: { conversation: string }) => c.conversation)).toEqual(['telegram:-100', 'telegram:2']);
    expect(JSON.stringify(bob)).not.toContain('alice');
  });

  it('is found by any of their accounts, and an unlinked account takes its conversations with it', async () => {
    const { identities } = await people();
    const byAccount = await doc(await exporter().identity('discord:11'));
    expect(byAccount).toMatchObject({ identity: 'telegram:1', query: 'discord:11' });
    await identities.unlink('discord:11');
    const after = await doc(await exporter().identity('telegram:1'));
    expect(after.accounts).toEqual(['telegram:1']);
    expect(after.conversations.map((c: { conversation: string }) => c.conversation)).toEqual(['telegram:-100', 'telegram:1']);
  });

  it('finds nothing for an identity nothing is kept for, skips a purged conversation, and refuses a bad id', async () => {
    expect(await exporter().identity('telegram:404')).toEqual({ kind: 'not_found' });
    await record('telegram:3', [msg('3', 'hello')]);
    await new ConversationIndex({ redis, prefix }).note('telegram', '3', 'telegram:3');
    expect((await doc(await exporter().identity('telegram:3'))).conversations).toHaveLength(1);
    await purgeConversation(redis, prefix, 'telegram:3');
    expect((await doc(await exporter().identity('telegram:3'))).conversations).toEqual([]);
    await expect(exporter().identity('a {b}')).rejects.toThrow(InvalidInputError);
  });
});

/** `redis` as the export sees it, counting its record reads (`XRANGE`). */
function countingRecordReads(redis: RedisClient): { client: RedisClient; readonly reads: number } {
  let reads = 0;
  const client = new Proxy(redis, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === 'xrange') {
        return (...args: unknown[]) => {
          reads++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as RedisClient;
  return {
    client,
    get reads() {
      return reads;
    },
  };
}
