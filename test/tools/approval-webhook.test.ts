/**
 * Approval over a webhook channel, the whole system as `npm start` builds it:
 * the approval request reaches the receiver as a signed callback carrying
 * Approve / Deny actions; the decision comes back as an ordinary signed
 * message (the action's command) and the tool runs once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentTool } from '../../plugins/local-agent/index.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { cleanupPrefix, redisUrl } from '../helpers/redis.js';
import { startWebhookSystem, WEBHOOK_SECRET, type WebhookSystem } from '../helpers/webhook-system.js';

let fake: FakeOpenAIServer;
let callbacks: CallbackServer;
let s: WebhookSystem | undefined;
beforeEach(async () => {
  fake = await startFakeOpenAI();
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
});
afterEach(async () => {
  if (s) {
    const { prefix, ctx } = s;
    const client = ctx.connectRedis();
    await s.stop();
    await cleanupPrefix(client, prefix);
    await cleanupPrefix(client, bullPrefixFor(prefix));
    client.disconnect();
  }
  s = undefined;
  await callbacks.close();
  await fake.close();
});

describe('approval over a webhook channel', () => {
  it('sends a signed approval request with actions; the signed decision message runs the tool once', async () => {
    const runs: string[] = [];
    const cancel: AgentTool<{ order: string }> = {
      name: 'cancel_order',
      description: 'cancels an order',
      inputSchema: z.object({ order: z.string() }),
      execute: async ({ order }) => {
        runs.push(order);
        return { cancelled: order };
      },
    };
    fake.script([{ toolCalls: [{ id: 'c1', name: 'cancel_order', args: { order: 'A-17' } }] }, { text: 'Order A-17 is cancelled.' }]);
    s = await startWebhookSystem({
      redisEnv: { REDIS_URL: redisUrl() },
      modelBaseURL: fake.url,
      callbackUrl: callbacks.url,
      tools: [cancel],
      toolbox: { policy: { tools: { cancel_order: 'require_approval' } } },
    });

    expect((await s.post({ id: 'm1', conversation: 'ticket-9', text: 'cancel order A-17' })).status).toBe(202);
    const [request] = await callbacks.waitForAccepted(1, 15_000);
    expect(request!.signed).toBe(true);
    expect(request!.body.text).toContain('cancel_order');
    const actions = request!.body.actions!;
    expect(actions.map((a) => a.label)).toEqual(['Approve', 'Deny']);
    expect(runs).toEqual([]);

    // Someone else's decision is refused and changes nothing; the starter's is taken.
    await s.post({ id: 'm2', conversation: 'ticket-9', text: actions[0]!.command, sender: { id: 'mallory' } });
    await s.post({ id: 'm3', conversation: 'ticket-9', text: actions[0]!.command });
    await callbacks.waitForAccepted(4, 15_000);
    await s.drained();
    const texts = callbacks.texts('ticket-9');
    expect(texts).toContain('You are not allowed to decide this request. Nothing changed.');
    expect(texts).toContain('Approved: cancel_order will run.');
    expect(texts.at(-1)).toBe('Order A-17 is cancelled.');
    expect(runs).toEqual(['A-17']);
  });
});
