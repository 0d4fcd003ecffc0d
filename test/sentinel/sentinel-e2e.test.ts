/**
 * The whole system in `sentinel` mode (REDIS_MODE=sentinel): host and runner
 * find the master through a Sentinel watching a private master and replica,
 * answer messages, and go on answering after the Sentinel fails over to the
 * replica.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../../testing/fakes/openai-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { type PrivateSentinel, startPrivateSentinel } from '../helpers/private-sentinel.js';
import { startWebhookSystem, WEBHOOK_SECRET, type WebhookSystem } from '../helpers/webhook-system.js';

let sentinel: PrivateSentinel;
let fake: FakeOpenAIServer;
let callbacks: CallbackServer;
let sys: WebhookSystem | undefined;
const env = () => ({ REDIS_MODE: 'sentinel', REDIS_SENTINELS: sentinel.sentinels.join(','), REDIS_SENTINEL_NAME: sentinel.name });

/** One system for the file: the second test fails over under it. */
beforeAll(async () => {
  sentinel = await startPrivateSentinel();
  fake = await startFakeOpenAI();
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  fake.script((body: any) => ({ text: `answer to ${String(body.messages.at(-1).content)}` }) satisfies FakeTurn);
  sys = await startWebhookSystem({ redisEnv: env(), modelBaseURL: fake.url, callbackUrl: callbacks.url });
}, 30_000);
afterAll(async () => {
  await sys?.stop();
  await callbacks?.close();
  await fake?.close();
  await sentinel?.stop();
});
afterEach(() => {
  callbacks.requests.length = 0;
});

describe('through Redis Sentinel', () => {
  it('finds the master and answers every message once', async () => {
    const s = sys!;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => s.post({ id: `m${i % 10}`, conversation: `c${i % 10}`, text: `question ${i % 10}` })),
    );
    expect(results.filter((r) => r.status === 202 && r.body.result === 'new-run')).toHaveLength(10);
    expect(results.filter((r) => r.status === 200 && r.body.result === 'duplicate')).toHaveLength(10);
    await callbacks.waitForAccepted(10, 15_000);
    await s.drained();
    for (let i = 0; i < 10; i++) expect(callbacks.texts(`c${i}`)).toEqual([`answer to question ${i}`]);
  });

  it('goes on after a failover: the messages the old master took and new ones are answered once, and their dedupe holds', async () => {
    const s = sys!;
    const before = await sentinel.master();
    const first = await s.post({ id: 'f1', conversation: 'failover', text: 'before the failover' });
    expect(first.status).toBe(202);
    await callbacks.waitForAccepted(1, 15_000);

    const after = await sentinel.failover();
    expect(after).not.toBe(before);

    // Until the clients have moved to the new master a request may get 503 (the platform retries): retry like one.
    const retried = async (payload: Record<string, unknown>) =>
      waitFor(
        async () => {
          const r = await s.post(payload);
          return r.status === 503 ? undefined : r;
        },
        20_000,
        'the host to reach the new master',
        200,
      );
    expect((await retried({ id: 'f2', conversation: 'failover', text: 'after the failover' })).status).toBe(202);
    // The update the old master took was replicated: a redelivery is still a duplicate.
    expect(await retried({ id: 'f1', conversation: 'failover', text: 'before the failover' })).toMatchObject({ status: 200, body: { result: 'duplicate' } });

    await callbacks.waitForAccepted(2, 20_000);
    await s.drained();
    expect(callbacks.texts('failover')).toEqual(['answer to before the failover', 'answer to after the failover']);
  });
});
