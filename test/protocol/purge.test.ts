/** purgeConversation: one atomic delete of a conversation, a tombstone, and what later updates and late run writes get. */
import { describe, expect, it } from 'vitest';
import webhooks from '../../plugins/webhook/index.js';
import { cursorKey } from '../../plugins/webhook/keys.js';
import { InvalidInputError, RunNotFoundError } from '../../src/errors.js';
import { declaredConversationKeys } from '../../src/plugin/storage.js';
import type { RunRef } from '../../src/protocol/index.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import type { ModelStep } from '../../src/record/entries.js';
import { runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';
import { CID, expectKind, type ProtocolFixture, useProtocolFixture } from '../helpers/protocol-fixture.js';

const modelStep = (run: RunRef): ModelStep => ({
  v: 1,
  kind: 'model.step',
  at: Date.now(),
  run: run.runId,
  token: run.token,
  step: 0,
  messages: [{ role: 'assistant', content: 'hello' }],
});

/** The webhook channels' declared conversation keys: purged with the conversation. */
const PLUGIN_KEYS = declaredConversationKeys([webhooks]);
/** A conversation with everything a conversation stores: an ended run, a running one, state, outbox, steering, pending, channel keys. */
async function busyConversation(fx: ProtocolFixture) {
  const d = fx.dispatch();
  const runs = fx.runs();
  const state = fx.state();
  const k = fx.keys();
  const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
  const r1 = await runs.acquire(CID, first.runId, 'w1');
  await runs.append(r1, modelStep(r1));
  await state.set(r1, 'runner.compaction.checkpoint', {
    schema_version: 1,
    conversation_id: CID,
    summary: 's',
    covers_until: 1,
    tokens_before: 1,
    tokens_after: 1,
    created_at: 1,
    summarizer: 'fallback',
  });
  checkReply(
    'outbox-claim',
    await runScript(
      fx.redis,
      'outbox-claim',
      [k.outbox, k.run(first.runId), k.outboxIndex],
      [`${first.runId}:1:0`, r1.token, JSON.stringify({ status: 'acknowledged' }), 3600],
    ),
  );
  // The webhook channel's keys: its reply stream, a reply mark named by the delivery key, its cursor.
  await fx.redis.xadd(k.replies, '*', 'data', '{}');
  await fx.redis.set(k.replyStored(`${first.runId}:1:0`), '1-0', 'EX', 3600);
  await fx.redis.set(cursorKey(fx.prefix, CID), '1-0');
  expect((await runs.finish(r1, 'completed')).kind).toBe('ended');
  const second = expectKind(await d.ingest(fx.message(2)), 'new-run');
  const r2 = await runs.acquire(CID, second.runId, 'w2');
  expectKind(await d.ingest(fx.message(3)), 'steered');
  await d.setPolicy(fx.source(1), 'collect');
  expectKind(await d.ingest(fx.message(4)), 'pending');
  return { d, runs, state, k, r1, r2, first, second };
}

/** Keys left under the test prefix that are not dedupe keys. */
async function nonDedupeKeys(fx: ProtocolFixture): Promise<string[]> {
  return (await fx.allKeys()).filter((key) => !key.includes(':dedupe:'));
}

describe('purgeConversation', () => {
  const fx = useProtocolFixture();

  describe('when nothing was ever stored', () => {
    it('answers not_found and writes nothing', async () => {
      expect(await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS })).toEqual({ kind: 'not_found' });
      expect(await fx.allKeys()).toEqual([]);
    });
  });

  describe('when a run is active', () => {
    it('answers active with the run id and writes nothing', async () => {
      const { second } = await busyConversation(fx);
      const before = await fx.snapshot();
      expect(await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS })).toEqual({ kind: 'active', runId: second.runId });
      expect(await fx.snapshot()).toEqual(before);
    });

    it('with stopActive, tells the runner to stop and deletes everything, leaving only dedupe keys and the tombstone', async () => {
      const { k, second } = await busyConversation(fx);
      const sub = await fx.subscribeControl();
      const r = await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      expect(r).toMatchObject({ kind: 'purged', stoppedRunId: second.runId });
      expect(await fx.redis.ttl(k.tombstone)).toBeGreaterThan(0);
      expect(await sub.waitFor()).toEqual({ conversation: CID, run: second.runId, kind: 'stop' });
      expect(await nonDedupeKeys(fx)).toEqual([k.tombstone]);
      // Dedupe keys hold only the seq an update became.
      for (const key of (await fx.allKeys()).filter((x) => x.includes(':dedupe:'))) expect(await fx.redis.get(key)).toMatch(/^\d+$/);
    });
  });

  describe('when idle', () => {
    it('deletes the record, runs, state, outbox and channel keys in one step and reports the last seq', async () => {
      const d = fx.dispatch();
      const runs = fx.runs();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      const run = await runs.acquire(CID, first.runId, 'w');
      await runs.append(run, modelStep(run));
      await runs.finish(run, 'completed');
      const lastSeq = Number(await fx.redis.hget(fx.keys().meta, 'seq'));
      await fx.redis.xadd(fx.keys().replies, '*', 'data', '{}');

      const r = await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS });
      expect(r).toEqual({ kind: 'purged', keysDeleted: expect.any(Number), lastSeq });
      if (r.kind === 'purged') expect(r.keysDeleted).toBeGreaterThanOrEqual(4); // log, meta, run, runs, replies
      expect(await nonDedupeKeys(fx)).toEqual([fx.keys().tombstone]);
      expect(await fx.redis.hgetall(fx.keys().tombstone)).toMatchObject({ mode: 'refuse', seq: String(lastSeq) });
    });

    it('answers already_purged the second time, writing nothing', async () => {
      await fx.dispatch().ingest(fx.message(1));
      await fx
        .runs()
        .acquire(CID, (await fx.redis.get(fx.keys().active))!, 'w')
        .then((run) => fx.runs().finish(run, 'completed'));
      expect((await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS })).kind).toBe('purged');
      const before = await fx.snapshot();
      expect(await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS })).toEqual({ kind: 'already_purged' });
      expect(await fx.snapshot()).toEqual(before);
    });

    it('keeps the tombstone at least as long as dedupe keys live', async () => {
      await fx.dispatch().ingest(fx.message(1));
      await fx
        .runs()
        .acquire(CID, (await fx.redis.get(fx.keys().active))!, 'w')
        .then((run) => fx.runs().finish(run, 'completed'));
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, tombstoneTtlSeconds: 60, dedupeTtlSeconds: 5000 });
      const ttl = await fx.redis.ttl(fx.keys().tombstone);
      expect(ttl).toBeGreaterThan(4900);
      expect(ttl).toBeLessThanOrEqual(5000);
    });
  });

  describe('late writes of a purged run', () => {
    it('are refused: heartbeat, append, pull, state set, outbox claim, finish and acquire write nothing', async () => {
      const { runs, state, k, r2, second } = await busyConversation(fx);
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      const before = await fx.snapshot();
      await expect(runs.heartbeat(r2)).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(runs.append(r2, modelStep(r2))).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(runs.pull(r2)).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(state.set(r2, 'runner.compaction.checkpoint', { x: 1 })).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(
        runScript(fx.redis, 'outbox-claim', [k.outbox, k.run(second.runId), k.outboxIndex], ['x:1:0', r2.token, '{"status":"possibly-dispatched"}', 3600]).then(
          (r) => checkReply('outbox-claim', r),
        ),
      ).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(runs.finish(r2, 'stopped')).rejects.toBeInstanceOf(RunNotFoundError);
      await expect(runs.acquire(CID, second.runId, 'w3')).rejects.toBeInstanceOf(RunNotFoundError);
      expect(await fx.snapshot()).toEqual(before);
    });
  });

  describe('later updates, afterPurge refuse (default)', () => {
    it('are answered purged, writing only their dedupe key; a redelivery is a duplicate', async () => {
      await busyConversation(fx);
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      const d = fx.dispatch();
      expect(await d.ingest(fx.message(10))).toEqual({ kind: 'purged', seq: 0 });
      expect(await nonDedupeKeys(fx)).toEqual([fx.keys().tombstone]);
      expect(await d.ingest(fx.message(10))).toEqual({ kind: 'duplicate', seq: 0 });
    });

    it('a redelivered pre-purge update stays a duplicate of its original seq', async () => {
      await busyConversation(fx);
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      expect(await fx.dispatch().ingest(fx.message(1))).toEqual({ kind: 'duplicate', seq: 1 });
    });

    it('control commands are answered purged, writing only their dedupe key (seq 0); a redelivery is a duplicate', async () => {
      await busyConversation(fx);
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      const d = fx.dispatch();
      const commands = [
        () => d.reset(fx.source(20)),
        () => d.setPolicy(fx.source(21), 'steer'),
        () => d.requestStop(fx.source(22), 'stop'),
        () => d.requestCompaction(fx.source(23)),
        () => d.statusCommand(fx.source(24)),
      ];
      for (const command of commands) expect(await command()).toEqual({ kind: 'purged', seq: 0 });
      expect(await nonDedupeKeys(fx)).toEqual([fx.keys().tombstone]);
      for (const n of [20, 21, 22, 23, 24]) expect(await fx.redis.get(fx.keys().dedupe(fx.source(n).updateKey))).toBe('0');

      const before = await fx.snapshot();
      for (const command of commands.slice(0, 4)) expect(await command()).toEqual({ kind: 'duplicate', seq: 0 });
      expect(await d.statusCommand(fx.source(24))).toEqual({ kind: 'duplicate' });
      expect(await fx.snapshot()).toEqual(before);
    });

    it('a redelivered pre-purge command stays a duplicate of its original seq', async () => {
      await busyConversation(fx);
      const seq = Number(await fx.redis.get(fx.keys().dedupe(fx.source(1).updateKey)));
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true });
      expect(await fx.dispatch().setPolicy(fx.source(1), 'collect')).toEqual({ kind: 'duplicate', seq });
      expect(seq).toBeGreaterThan(0);
    });
  });

  describe('later updates, afterPurge restart', () => {
    it('start a new, empty conversation whose seqs continue after the purged record', async () => {
      const { r2 } = await busyConversation(fx);
      const r = await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true, afterPurge: 'restart' });
      if (r.kind !== 'purged') throw new Error(r.kind);
      const d = fx.dispatch();
      const fresh = expectKind(await d.ingest(fx.message(30)), 'new-run');
      expect(fresh.seq).toBe(r.lastSeq + 1);
      expect(await fx.redis.exists(fx.keys().tombstone)).toBe(0);
      expect((await fx.record()).map((e) => e.seq)).toEqual([fresh.seq]);
      // The old run stays fenced out of the new conversation.
      await expect(fx.runs().finish(r2, 'completed')).rejects.toBeInstanceOf(RunNotFoundError);
      expect(await fx.redis.get(fx.keys().active)).toBe(fresh.runId);
    });

    it('/status shows the empty conversation and leaves the tombstone for the next update to lift', async () => {
      await busyConversation(fx);
      await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true, afterPurge: 'restart' });
      const r = await fx.dispatch().statusCommand(fx.source(40));
      expect(r).toMatchObject({ kind: 'status', status: { activeRunId: undefined, lastSeq: 0 } });
      expect(await nonDedupeKeys(fx)).toEqual([fx.keys().tombstone]);
    });

    it('a control command lifts the tombstone and is recorded after the purged seqs', async () => {
      await busyConversation(fx);
      const r = await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true, afterPurge: 'restart' });
      if (r.kind !== 'purged') throw new Error(r.kind);
      expect(await fx.dispatch().setPolicy(fx.source(41), 'steer')).toEqual({ kind: 'ok', seq: r.lastSeq + 1 });
      expect(await fx.redis.exists(fx.keys().tombstone)).toBe(0);
    });
  });

  describe('the /purge command update', () => {
    it('is deduped: a redelivery answers duplicate and purges nothing new', async () => {
      await fx.dispatch().ingest(fx.message(1));
      await fx
        .runs()
        .acquire(CID, (await fx.redis.get(fx.keys().active))!, 'w')
        .then((run) => fx.runs().finish(run, 'completed'));
      expect((await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, updateKey: 'telegram:cmd-p', afterPurge: 'restart' })).kind).toBe(
        'purged',
      );
      expectKind(await fx.dispatch().ingest(fx.message(2)), 'new-run');
      const before = await fx.snapshot();
      expect(await purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, updateKey: 'telegram:cmd-p', stopActive: true })).toEqual({
        kind: 'duplicate',
      });
      expect(await fx.snapshot()).toEqual(before);
    });
  });

  describe('bad input', () => {
    it('refuses a bad conversation id, mode or update key, writing nothing', async () => {
      await expect(purgeConversation(fx.redis, fx.prefix, 'has space')).rejects.toBeInstanceOf(InvalidInputError);
      await expect(purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, afterPurge: 'later' as never })).rejects.toBeInstanceOf(
        InvalidInputError,
      );
      await expect(purgeConversation(fx.redis, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, updateKey: 'a b' })).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });
  });

  describe('racing ingest', () => {
    it('every update lands either before the purge (and is deleted) or after it (and is refused); nothing half-written', async () => {
      await busyConversation(fx);
      const clients = fx.connections(4);
      const results = await Promise.all([
        ...Array.from({ length: 40 }, (_, i) => fx.dispatch({}, clients[i % 4]!).ingest(fx.message(100 + i))),
        purgeConversation(clients[0]!, fx.prefix, CID, { pluginKeys: PLUGIN_KEYS, stopActive: true }),
      ]);
      const purge = results.at(-1)!;
      expect(purge.kind).toBe('purged');
      const ingests = results.slice(0, -1) as Array<{ kind: string; seq: number }>;
      // Before the purge: recorded (and now deleted), its dedupe key holds its seq; after it: refused, seq 0.
      for (const [i, r] of ingests.entries()) {
        expect(['joined', 'steered', 'pending', 'purged']).toContain(r.kind);
        expect(await fx.redis.get(fx.keys().dedupe(`telegram:${100 + i}`))).toBe(String(r.seq));
        if (r.kind === 'purged') expect(r.seq).toBe(0);
      }
      expect(await nonDedupeKeys(fx)).toEqual([fx.keys().tombstone]);
    });
  });
});
