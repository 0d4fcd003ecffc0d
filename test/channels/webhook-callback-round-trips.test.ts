/**
 * What a called-back reply costs in Redis: the commands the sender and the
 * callback pump send for one reply and for a backlog, and the race the pump's
 * last step covers (a reply stored after its last empty read, while it gives
 * the conversation up).
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CallbackPump } from '../../plugins/webhook/callbacks.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { lockKey, pendingKey, wakeChannel } from '../../plugins/webhook/keys.js';
import { createWebhookOutbound } from '../../plugins/webhook/outbound.js';
import { createHttpClient, type HttpClient } from '../../src/http/client.js';
import { createLogger } from '../../src/logger.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { stopPumpParts } from '../helpers/callback-pump.js';
import { redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-trips-0123456789abcdef';
const CHANNEL = 'webhook:crm';
const CONVERSATION = `${CHANNEL}:ticket-1`;
/** Commands of one pass over a conversation with a single reply: poll, claim, schedule, advance, drop the mark, finish. */
const PASS_COMMANDS = 6;
/** Commands of a stored reply: the store and the mark (which publishes the wake-up). */
const SEND_COMMANDS = 2;
const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** The commands a client writes, by name, and how many of them were answered; `before` runs ahead of writing one (a test's hook). */
interface Sent {
  names: string[];
  settled(): number;
  before?: ((name: string) => Promise<void> | undefined) | undefined;
}

function recordSent(client: Redis): Sent {
  let settled = 0;
  const sent: Sent = { names: [], settled: () => settled };
  const orig = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof orig>) => {
    const name = args[0].name;
    sent.names.push(name);
    const hook = sent.before?.(name);
    const reply = hook ? hook.then(() => orig(...args)) : orig(...args);
    void Promise.resolve(reply).then(
      () => settled++,
      () => settled++,
    );
    return reply;
  }) as typeof client.sendCommand;
  return sent;
}

let redis: Redis;
let pumpRedis: Redis;
let senderRedis: Redis;
let prefix: string;
let receiver: CallbackServer;
let client: HttpClient;
let pump: CallbackPump | undefined;
let pumpSent: Sent;
let senderSent: Sent;

const config = () => webhookChannelConfigSchema.parse({ secret: SECRET, callbackUrl: receiver.url, callbackPollMs: 60_000 });
const send = (text: string) => createWebhookOutbound({ channelId: CHANNEL, config: config(), redis: senderRedis, prefix }).send(CONVERSATION, text);

/** Starts the pump (a poll a minute apart: only wake-ups and marks drive it) and waits until its first poll is answered and it listens. */
async function startPump(): Promise<void> {
  pump = new CallbackPump({ channelId: CHANNEL, config: config(), redis: pumpRedis, prefix, logger, request: (url, init) => client.request(url, init) });
  pump.start();
  const channel = wakeChannel(prefix, CHANNEL);
  await waitFor(async () => ((await redis.pubsub('NUMSUB', channel)) as [string, number])[1] === 1 || undefined, 5000, 'the pump subscribed');
  await waitFor(() => (pumpSent.names.length > 0 && pumpSent.settled() === pumpSent.names.length) || undefined, 5000, 'the first poll answered');
}

/** The pump has given the conversation up (its lock is gone) and has no command in flight. */
const pumpIdle = () =>
  waitFor(
    async () => ((await redis.exists(lockKey(prefix, CONVERSATION))) === 0 && pumpSent.settled() === pumpSent.names.length) || undefined,
    5000,
    'the pump idle',
  );

beforeEach(async () => {
  redis = new Redis(redisUrl());
  pumpRedis = new Redis(redisUrl());
  senderRedis = new Redis(redisUrl());
  // Connected: the handshake is not counted.
  await Promise.all([pumpRedis.ping(), senderRedis.ping()]);
  pumpSent = recordSent(pumpRedis);
  senderSent = recordSent(senderRedis);
  prefix = testPrefix();
  receiver = await startCallbackServer(SECRET);
  client = createHttpClient();
});
afterEach(async () => {
  await stopPumpParts({ pump, client, receiver, redis, prefix });
  pump = undefined;
  await Promise.all([redis.quit(), pumpRedis.quit(), senderRedis.quit()]);
});

describe('callback round trips', () => {
  it(`cost at most ${SEND_COMMANDS} commands to store a reply and ${PASS_COMMANDS} to call it back`, async () => {
    await startPump();
    for (let i = 0; i < 3; i++) {
      const pumped = pumpSent.names.length;
      const stored = senderSent.names.length;
      await send(`reply ${i}`);
      const sendNames = senderSent.names.slice(stored);
      expect(sendNames.length, sendNames.join(' ')).toBeLessThanOrEqual(SEND_COMMANDS);
      await receiver.waitForAccepted(i + 1);
      await pumpIdle();
      const passNames = pumpSent.names.slice(pumped);
      expect(passNames.length, passNames.join(' ')).toBeLessThanOrEqual(PASS_COMMANDS);
    }
    expect(receiver.texts('ticket-1')).toEqual(['reply 0', 'reply 1', 'reply 2']);
    expect(await redis.zcard(pendingKey(prefix, CHANNEL))).toBe(0);
  });

  it('cost one command per reply of a backlog past the pass itself', async () => {
    const n = 5;
    for (let i = 0; i < n; i++) await send(`reply ${i}`);
    await startPump();
    await receiver.waitForAccepted(n);
    await pumpIdle();
    expect(pumpSent.names.length, pumpSent.names.join(' ')).toBeLessThanOrEqual(PASS_COMMANDS + n - 1);
    expect(receiver.texts('ticket-1')).toEqual(Array.from({ length: n }, (_, i) => `reply ${i}`));
    expect(await redis.zcard(pendingKey(prefix, CHANNEL))).toBe(0);
  });

  it('miss no reply stored after the last empty read, while the pump drops the mark and gives the conversation up', async () => {
    await startPump();
    let scoreWhenStored: string | null = null;
    // Right before the pump drops the conversation's mark (its last read found nothing after the cursor), a reply is
    // stored and marked: the mark is already there (held by the pump), so it is the pump's last look that must find it.
    pumpSent.before = (name) => {
      if (name !== 'zrem') return undefined;
      pumpSent.before = undefined;
      return send('stored in between').then(async () => {
        scoreWhenStored = await redis.zscore(pendingKey(prefix, CHANNEL), CONVERSATION);
      });
    };
    await send('first');
    await receiver.waitForAccepted(2, 5000);
    expect(receiver.texts('ticket-1')).toEqual(['first', 'stored in between']);
    // The mark the second reply found was the pump's (its lock's expiry), not a new one due now.
    expect(Number(scoreWhenStored)).toBeGreaterThan(Date.now());
    await waitFor(async () => (await redis.zcard(pendingKey(prefix, CHANNEL))) === 0 || undefined, 5000, 'nothing pending');
  });
});
