/**
 * Matrix polls kept with their conversation, end to end (the fake
 * homeserver's `/sync` → the real plugin → the channel host → the runner
 * with the local agent's `ask_user` → a poll): `/purge` deletes a poll with
 * the conversation (a room's, or a thread's and its room's pointer at it) and a response to it then runs
 * nothing; a choice whose `poll.end` failed ends the poll once when the
 * response is handled again, the choice taken once. Then the store's
 * bounds, against Redis alone.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { pollsKey } from '../../plugins/matrix/keys.js';
import { dropThreadPointers, forgetPoll, keepPoll, keptPoll, MAX_KEPT_POLLS, POLL_TTL_SECONDS } from '../../plugins/matrix/poll-store.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeMatrix, MATRIX_ALICE, type MatrixPoll, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { startMatrixSystem, untilSyncing } from './matrix-harness.js';

const ASK = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };
const POLL_END = 'org.matrix.msc3381.poll.end';

describe('matrix polls end to end', () => {
  let ai: FakeOpenAIServer;
  let matrix: FakeMatrix;
  let h: RunnerHarness;
  let http: HttpServer;
  let plugin: ChannelPlugin;
  let room: string;

  beforeEach(async () => {
    ai = await startFakeOpenAI();
    matrix = await startFakeMatrix();
    h = await RunnerHarness.start();
    room = matrix.directRoom(MATRIX_ALICE);
    ({ http, plugin } = await startMatrixSystem({
      h,
      matrix,
      agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false, askUser: true } }),
    }));
    await untilSyncing(matrix);
  });
  afterEach(async () => {
    await plugin.stop();
    await http.close();
    await h.close();
    await matrix.close();
    await ai.close();
  });

  const CONVERSATION = () => `matrix:${room}`;
  const waitText = (text: string) => matrix.waitUntil(() => matrix.texts(room).includes(text), 15_000, `the text ${JSON.stringify(text)}`);
  /** Waits until the bot has handled every event in the stream now (its next `/sync` starts after them). */
  const handled = async () => {
    const now = matrix.position();
    await matrix.waitUntil(() => matrix.calls.some((c) => c.kind === 'sync' && c.query.since === now), 15_000, 'a /sync after the events');
  };
  /** Every key under the test's prefix with what it holds, as text; but the `/sync` position, which moves on with every answer. */
  async function dump(): Promise<Array<{ key: string; value: string }>> {
    const out: Array<{ key: string; value: string }> = [];
    for (const key of (await h.redis.keys(`${h.prefix}:*`)).sort()) {
      if (key.includes(':p:matrix:since:')) continue;
      const type = await h.redis.type(key);
      const value =
        type === 'string'
          ? await h.redis.get(key)
          : type === 'hash'
            ? await h.redis.hgetall(key)
            : type === 'stream'
              ? await h.redis.xrange(key, '-', '+')
              : type === 'zset'
                ? await h.redis.zrange(key, '0', '-1')
                : type === 'set'
                  ? await h.redis.smembers(key)
                  : await h.redis.lrange(key, 0, -1);
      out.push({ key, value: JSON.stringify(value) });
    }
    return out;
  }
  /** The keys under the test's prefix whose name or value holds any of `needles`. */
  const holding = async (needles: readonly string[]) =>
    (await dump()).filter((k) => needles.some((n) => k.key.includes(n) || k.value.includes(n))).map((k) => k.key);
  /** The keys of conversation `cid` a purge leaves by design: its tombstone and update dedupe keys. */
  const leftBy = (cid: string, keys: readonly string[]) => keys.filter((k) => !k.startsWith(`${h.prefix}:{c:${cid}}:tombstone`) && !k.includes('}:dedupe:'));

  /** Asks the plan question (in `thread`, when given) and returns the poll that came with it and its answers' commands. */
  async function askPlan(answer: string, thread?: Record<string, unknown>): Promise<{ poll: MatrixPoll; commands: string[] }> {
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: answer }]);
    matrix.message(room, MATRIX_ALICE, 'book me a plan', thread ? { relatesTo: thread } : {});
    const poll = await matrix.waitUntil(() => matrix.polls(room)[0], 15_000, 'the poll');
    const cid = thread ? `${CONVERSATION()}/${String(thread.event_id)}` : CONVERSATION();
    const kept = await waitFor(() => keptPoll(h.redis, h.prefix, cid, poll.eventId), 15_000, 'the poll kept');
    return { poll, commands: Object.values(kept.answers) };
  }

  it('/purge deletes the poll with the conversation; a response to it afterwards runs nothing and writes nothing', async () => {
    const { poll, commands } = await askPlan('Team plan booked.');
    expect(commands).toHaveLength(3);
    expect(await h.redis.hexists(pollsKey(h.prefix, CONVERSATION()), poll.eventId)).toBe(1);

    // The run waits for the choice: the person stops it with the purge.
    matrix.message(room, MATRIX_ALICE, '/purge stop');
    await matrix.waitUntil(() => matrix.texts(room).some((t) => t.startsWith('Deleted this conversation')), 15_000, 'the purge answer');
    await h.idle(15_000, CONVERSATION());
    expect(await holding([poll.eventId, ...commands])).toEqual([]);
    expect(leftBy(CONVERSATION(), await holding([`{c:${CONVERSATION()}}`]))).toEqual([]);

    await handled();
    const before = { texts: matrix.texts(room), redis: await dump() };
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[2]!.id]);
    await handled();
    expect({ texts: matrix.texts(room), redis: await dump() }).toEqual(before);
    expect(matrix.polls(room)[0]!.ended).toBeUndefined();
    expect(ai.requests).toHaveLength(1);
  });

  it("/purge in a thread deletes the thread's poll and its room's pointer at it; a response to it afterwards runs nothing", async () => {
    const root = matrix.message(room, MATRIX_ALICE, 'plans thread');
    ai.script([{ text: 'A thread, then.' }]);
    await waitText('A thread, then.');
    await h.idle(15_000, CONVERSATION());
    const inThread = { rel_type: 'm.thread', event_id: root.event_id, is_falling_back: true, 'm.in_reply_to': { event_id: root.event_id } };
    const thread = `${CONVERSATION()}/${root.event_id}`;
    const { poll, commands } = await askPlan('Basic, then.', inThread);

    matrix.message(room, MATRIX_ALICE, '/purge stop', { relatesTo: inThread });
    await matrix.waitUntil(() => matrix.texts(room).some((t) => t.startsWith('Deleted this conversation')), 15_000, 'the purge answer');
    await h.idle(15_000, thread);
    expect(await holding(commands)).toEqual([]);
    expect(leftBy(thread, await holding([`{c:${thread}}`]))).toEqual([]);

    await handled();
    // The room's pointer at the thread's poll went with it (once the bot had handled the /purge).
    expect(await h.redis.hexists(pollsKey(h.prefix, CONVERSATION()), poll.eventId)).toBe(0);
    const texts = matrix.texts(room);
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[0]!.id]);
    await handled();
    expect(matrix.texts(room)).toEqual(texts);
    expect(matrix.polls(room)[0]!.ended).toBeUndefined();
    expect(await holding([`{c:${thread}}:p:`])).toEqual([]);
    expect(ai.requests).toHaveLength(2);
  });

  it('ends the poll once when its end failed after the choice was taken: the response handled again ends it, the choice taken once', async () => {
    const { poll } = await askPlan('Team plan booked.');
    await handled();
    matrix.failNext('send', { status: 500, eventType: POLL_END });
    const choice = matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[2]!.id]);
    await matrix.waitUntil(() => matrix.polls(room)[0]!.ended, 15_000, 'the poll ended');
    await waitText('Team plan booked.');
    await h.idle(15_000, CONVERSATION());

    const ends = () => matrix.calls.filter((c) => c.kind === 'send' && c.body?.[POLL_END] !== undefined);
    expect(ends().map((c) => c.status)).toEqual([500, 200]);
    expect(new Set(ends().map((c) => c.txnId)).size).toBe(1);
    expect(matrix.polls(room)[0]!.ended).toContain('Team (chosen by');
    expect(await h.redis.hexists(pollsKey(h.prefix, CONVERSATION()), poll.eventId)).toBe(0);
    // The choice was taken once: one button click recorded, one continuation of the run.
    expect(await h.entries('question.answered', CONVERSATION())).toHaveLength(1);
    expect(matrix.texts(room)).toEqual([expect.stringContaining('Which plan?'), 'Team plan booked.']);
    expect(ai.requests).toHaveLength(2);

    // The homeserver hands the response over once more: the poll is forgotten, nothing happens.
    await handled();
    const before = { texts: matrix.texts(room), redis: await dump() };
    matrix.redeliver(room, choice);
    await handled();
    expect({ texts: matrix.texts(room), redis: await dump() }).toEqual(before);
    expect(ends()).toHaveLength(2);
    expect(matrix.sent.filter((e) => e.type === POLL_END)).toHaveLength(1);
  });
});

describe('matrix poll store', () => {
  let redis: Redis;
  let prefix: string;
  const ROOM = '!room:fake.test';
  const CID = `matrix:${ROOM}`;
  const answers = { 'sb-a': '/choose qu_000000000000000000000000 1' };

  beforeEach(() => {
    redis = new Redis(redisUrl());
    prefix = testPrefix();
  });
  afterEach(async () => {
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  it(`keeps at most ${MAX_KEPT_POLLS} polls per conversation, the oldest dropped first, and the hash expires a week after the newest`, async () => {
    const t0 = 1_700_000_000_000;
    for (let i = 0; i < MAX_KEPT_POLLS + 3; i++) await keepPoll(redis, prefix, 'matrix', { conversationId: CID, pollId: `$p${i}`, answers }, t0 + i);
    expect(await redis.hlen(pollsKey(prefix, CID))).toBe(MAX_KEPT_POLLS);
    for (const gone of ['$p0', '$p1', '$p2']) expect(await keptPoll(redis, prefix, CID, gone, t0)).toBeUndefined();
    expect(await keptPoll(redis, prefix, CID, '$p3', t0)).toMatchObject({ conversationId: CID, answers });
    const ttl = await redis.ttl(pollsKey(prefix, CID));
    expect(ttl).toBeGreaterThan(POLL_TTL_SECONDS - 60);
    expect(ttl).toBeLessThanOrEqual(POLL_TTL_SECONDS);
  });

  it('reads an expired poll as gone, and deletes it when the next poll is kept', async () => {
    const t0 = 1_700_000_000_000;
    const later = t0 + POLL_TTL_SECONDS * 1000;
    await keepPoll(redis, prefix, 'matrix', { conversationId: CID, pollId: '$old', answers }, t0);
    expect(await keptPoll(redis, prefix, CID, '$old', later - 1)).toBeDefined();
    expect(await keptPoll(redis, prefix, CID, '$old', later)).toBeUndefined();
    await keepPoll(redis, prefix, 'matrix', { conversationId: CID, pollId: '$new', answers }, later);
    expect(await redis.hkeys(pollsKey(prefix, CID))).toEqual(['$new']);
  });

  it("keeps a thread's poll in the thread's conversation, its room pointing at it; forgetting it removes both", async () => {
    const thread = `${CID}/$root`;
    await keepPoll(redis, prefix, 'matrix', { conversationId: thread, pollId: '$tp', answers });
    expect(await keptPoll(redis, prefix, thread, '$tp')).toMatchObject({ conversationId: thread, answers });
    expect(JSON.parse((await redis.hget(pollsKey(prefix, CID), '$tp'))!)).toMatchObject({ thread: '$root' });
    expect(await keptPoll(redis, prefix, CID, '$tp')).toBeUndefined();
    await forgetPoll(redis, prefix, 'matrix', thread, '$tp');
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });

  it("drops a purged thread's pointers from its room, keeping the room's own polls, another thread's pointers and a poll the thread still keeps", async () => {
    const thread = `${CID}/$root`;
    const other = `${CID}/$other`;
    for (const [conversationId, pollId] of [
      [thread, '$gone1'],
      [thread, '$gone2'],
      [other, '$elsewhere'],
      [CID, '$room'],
    ] as const) {
      await keepPoll(redis, prefix, 'matrix', { conversationId, pollId, answers });
    }
    await redis.del(pollsKey(prefix, thread));
    await keepPoll(redis, prefix, 'matrix', { conversationId: thread, pollId: '$after', answers });

    expect(await dropThreadPointers(redis, prefix, 'matrix', thread)).toBe(2);
    expect((await redis.hkeys(pollsKey(prefix, CID))).sort()).toEqual(['$after', '$elsewhere', '$room']);
    expect(await dropThreadPointers(redis, prefix, 'matrix', thread)).toBe(0);
    expect(await dropThreadPointers(redis, prefix, 'matrix', CID)).toBe(0);
    expect((await redis.hkeys(pollsKey(prefix, CID))).sort()).toEqual(['$after', '$elsewhere', '$room']);
  });
});
