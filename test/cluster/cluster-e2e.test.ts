/**
 * The whole system in `cluster` mode (REDIS_MODE=cluster) against a private
 * three-master Redis Cluster: signed webhook POSTs → host → ingest scripts on
 * the conversation's master (batched per hash tag) → BullMQ (one slot) →
 * runner → delivery → callbacks. Conversations spread over every master; the
 * reconciler scans each master for runs that lost their job.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AgentTool } from '../../plugins/local-agent/index.js';
import type { AppContext } from '../../src/app-context.js';
import { Dispatch } from '../../src/protocol/index.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { type PrivateCluster, startPrivateCluster } from '../helpers/private-cluster.js';
import { testPrefix } from '../helpers/redis.js';
import { startWebhookSystem, WEBHOOK_SECRET, type WebhookSystem } from '../helpers/webhook-system.js';
import { gatedTool } from '../runner/harness.js';

let cluster: PrivateCluster;
let fake: FakeOpenAIServer;
let callbacks: CallbackServer;
let sys: WebhookSystem | undefined;

beforeAll(async () => {
  cluster = await startPrivateCluster(3);
  fake = await startFakeOpenAI();
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
}, 30_000);
afterAll(async () => {
  await callbacks?.close();
  await fake?.close();
  await cluster?.stop();
});
afterEach(async () => {
  await sys?.stop();
  sys = undefined;
  fake.requests.length = 0;
  callbacks.requests.length = 0;
});

const startSystem = (o: { tools?: AgentTool[]; prefix?: string; prepare?: (ctx: AppContext) => Promise<void> } = {}) =>
  startWebhookSystem({
    redisEnv: { REDIS_MODE: 'cluster', REDIS_CLUSTER_NODES: cluster.nodes.join(',') },
    modelBaseURL: fake.url,
    callbackUrl: callbacks.url,
    ...o,
  });

/** Which master holds a key (the masters own equal slot ranges in order). */
async function masterOf(s: WebhookSystem, key: string): Promise<number> {
  const slot = Number(await s.ctx.redis.cluster('KEYSLOT', key));
  return Math.floor(slot / Math.ceil(16384 / cluster.nodes.length));
}

describe('on Redis Cluster', () => {
  it('answers every message once, conversations spread over all three masters, each delivered twice at once', async () => {
    const s = (sys = await startSystem());
    fake.script((body: any) => ({ text: `answer to ${String(body.messages.at(-1).content)}` }) satisfies FakeTurn);
    const n = 30;

    const results = await Promise.all(
      Array.from({ length: n * 2 }, (_, i) => s.post({ id: `m${i % n}`, conversation: `c${i % n}`, text: `question ${i % n}` })),
    );

    const kinds = results.map((r) => `${r.status} ${r.body.result}`);
    expect(kinds.filter((k) => k === '202 new-run')).toHaveLength(n);
    expect(kinds.filter((k) => k === '200 duplicate')).toHaveLength(n);
    await callbacks.waitForAccepted(n, 20_000);
    await s.drained();
    for (let i = 0; i < n; i++) expect(callbacks.texts(`c${i}`)).toEqual([`answer to question ${i}`]);
    const masters = await Promise.all(Array.from({ length: n }, (_, i) => masterOf(s, conversationKeys(s.prefix, `webhook:e2e:c${i}`).base)));
    expect(new Set(masters)).toEqual(new Set([0, 1, 2]));
  });

  it('batches, in one turn, only the updates of one conversation into a call (one hash tag, one slot)', async () => {
    const s = (sys = await startSystem());
    const dispatch = new Dispatch({ client: s.ctx.redis, prefix: s.prefix });
    // 10 conversations × 3 updates, all in the same event-loop turn.
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        dispatch.ingest({ conversationId: `webhook:e2e:b${i % 10}`, updateKey: `webhook:e2e:b-${i}`, sender: { id: 'ann' }, text: `update ${i}` }),
      ),
    );
    expect(dispatch.ingestBatch.stats).toEqual({ calls: 10, items: 30 });
    for (let c = 0; c < 10; c++) {
      const mine = results.filter((_, i) => i % 10 === c);
      expect(mine.map((r) => r.kind)).toEqual(['new-run', 'joined', 'joined']);
      expect(mine.map((r) => r.seq)).toEqual([1, 2, 3]);
    }
  });

  it('steers a message sent while the agent runs a tool into the same run', async () => {
    const slow = gatedTool();
    const s = (sys = await startSystem({ tools: [slow.tool] }));
    fake.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Found it, weekend included.' }] satisfies FakeTurn[]);
    const first = await s.post({ id: 's1', conversation: 'steer', text: 'look up the schedule' });
    expect(first).toMatchObject({ status: 202, body: { result: 'new-run' } });
    await slow.started;

    const second = await s.post({ id: 's2', conversation: 'steer', text: 'also the weekend please' });
    expect(second).toMatchObject({ status: 202, body: { result: 'steered', runId: first.body.runId } });
    slow.release('SCHEDULE');

    await callbacks.waitForAccepted(1, 15_000);
    expect(callbacks.texts('steer')).toEqual(['Found it, weekend included.']);
    const users = fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);
    expect(users).toEqual(['look up the schedule', 'also the weekend please']);
    const started = (await s.record('steer')).filter((e) => e.kind === 'run.started');
    expect(started.map((e) => (e as { run: string }).run)).toEqual([first.body.runId]);
  });

  it('re-enqueues, at start-up, runs whose job was lost, scanning every master', async () => {
    fake.script((body: any) => ({ text: `late answer to ${String(body.messages.at(-1).content)}` }) satisfies FakeTurn);
    const prefix = testPrefix();
    const orphans: string[] = [];
    // Runs created as if a host died between the ingest script and the BullMQ enqueue, on several masters.
    sys = await startSystem({
      prefix,
      prepare: async (ctx) => {
        const dispatch = new Dispatch({ client: ctx.redis, prefix });
        for (let i = 0; i < 6; i++) {
          const r = await dispatch.ingest({ conversationId: `webhook:e2e:lost${i}`, updateKey: `webhook:e2e:l${i}`, sender: { id: 'ann' }, text: `lost ${i}` });
          expect(r.kind).toBe('new-run');
          orphans.push(conversationKeys(prefix, `webhook:e2e:lost${i}`).base);
        }
      },
    });
    const s = sys;
    expect(new Set(await Promise.all(orphans.map((k) => masterOf(s, k))))).toEqual(new Set([0, 1, 2]));

    await callbacks.waitForAccepted(6, 20_000);
    for (let i = 0; i < 6; i++) expect(callbacks.texts(`lost${i}`)).toEqual([`late answer to lost ${i}`]);
  });
});
