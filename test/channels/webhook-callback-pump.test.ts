/**
 * The webhook callback pump's connections and its stop signal: callbacks go
 * over one kept-alive connection, a stop cuts off a callback in flight, and
 * no callback leaves a listener on the pump's process-long stop signal.
 */
import { getEventListeners } from 'node:events';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CallbackPump } from '../../plugins/webhook/callbacks.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { wakeChannel } from '../../plugins/webhook/keys.js';
import { createWebhookOutbound } from '../../plugins/webhook/outbound.js';
import { createHttpClient, type HttpClient } from '../../src/http/client.js';
import { createLogger } from '../../src/logger.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { stopPumpParts } from '../helpers/callback-pump.js';
import { redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-pump-0123456789abcdef';
const CHANNEL = 'webhook:crm';
const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

let redis: Redis;
let prefix: string;
let receiver: CallbackServer;
let client: HttpClient;
let pump: CallbackPump | undefined;
/** The signals the pump handed to its requests. */
let signals: AbortSignal[];

function startPump(callbackPollMs = 10): { send(conversation: string, text: string): Promise<unknown> } {
  const config = webhookChannelConfigSchema.parse({ secret: SECRET, callbackUrl: receiver.url, callbackPollMs });
  pump = new CallbackPump({
    channelId: CHANNEL,
    config,
    redis,
    prefix,
    logger,
    request: (url, init) => {
      if (init?.signal) signals.push(init.signal);
      return client.request(url, init);
    },
  });
  pump.start();
  const outbound = createWebhookOutbound({ channelId: CHANNEL, config, redis, prefix });
  return { send: (conversation, text) => outbound.send(`${CHANNEL}:${conversation}`, text) };
}

beforeEach(async () => {
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  receiver = await startCallbackServer(SECRET);
  client = createHttpClient();
  signals = [];
});
afterEach(async () => {
  await stopPumpParts({ pump, client, receiver, redis, prefix });
  pump = undefined;
  await redis.quit();
});

describe('callback pump', () => {
  it('sends callbacks one after another over one kept-alive connection', async () => {
    const out = startPump();
    for (let i = 0; i < 5; i++) {
      await out.send('ticket-1', `reply ${i}`);
      await receiver.waitForAccepted(i + 1);
    }
    expect(receiver.texts('ticket-1')).toEqual(['reply 0', 'reply 1', 'reply 2', 'reply 3', 'reply 4']);
    expect(receiver.connections()).toBe(1);
  });

  it('is woken by a stored reply instead of waiting for its next poll', async () => {
    // A poll a minute apart: every reply after the first pass is sent only because its store woke the pump.
    const out = startPump(60_000);
    const channel = wakeChannel(prefix, CHANNEL);
    await waitFor(async () => ((await redis.pubsub('NUMSUB', channel)) as [string, number])[1] === 1 || undefined, 5000, 'the pump subscribed');
    for (let i = 0; i < 3; i++) {
      await out.send(`ticket-${i}`, `reply ${i}`);
      await receiver.waitForAccepted(i + 1, 5000);
    }
    expect(receiver.texts('ticket-2')).toEqual(['reply 2']);
  });

  it('leaves no listener on its stop signal once the callbacks are sent', async () => {
    const out = startPump();
    for (let i = 0; i < 20; i++) await out.send(`ticket-${i % 4}`, `reply ${i}`);
    await receiver.waitForAccepted(20);
    expect(signals.length).toBeGreaterThanOrEqual(20);
    const stop = signals[0]!;
    // One signal for every request: the pump's own, not one made per request around it.
    expect(signals.every((s) => s === stop)).toBe(true);
    await waitFor(() => getEventListeners(stop, 'abort').length === 0 || undefined, 5000, 'no listener left on the stop signal');
  });

  it('cuts off a callback in flight when stopped, and sends it again after a restart', async () => {
    const out = startPump();
    const release = receiver.hold();
    await out.send('ticket-1', 'held');
    await waitFor(() => receiver.received() === 1 || undefined, 5000, 'the callback in flight');
    await pump!.stop(); // resolves with the receiver still holding its answer: the request was aborted
    expect(receiver.accepted()).toHaveLength(0);
    release(); // the receiver records its late answer to a client that is gone
    startPump();
    await receiver.waitForAccepted(2);
    expect(receiver.texts('ticket-1')).toEqual(['held', 'held']);
  });
});
