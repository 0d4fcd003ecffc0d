/**
 * A purged webhook conversation's reply stream: the notices sent after the
 * purge (its own answer, a refused message's notice) go with the tombstone,
 * not stay for ever; a conversation restarted after a purge keeps its stream.
 */
import { describe, expect, it } from 'vitest';
import { PURGED_NOTICE } from '../../host/commands/index.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { createWebhookOutbound } from '../../plugins/webhook/outbound.js';
import type { InboundMessage } from '../../src/channel.js';
import type { AfterPurge } from '../../src/protocol/retention.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();
const CHANNEL = 'webhook:crm';
const WCID = `${CHANNEL}:t1`;

function setup(afterPurge: AfterPurge) {
  const outbound = createWebhookOutbound({
    channelId: CHANNEL,
    config: webhookChannelConfigSchema.parse({ secret: 'a-long-enough-secret' }),
    redis: fx.redis,
    prefix: fx.prefix,
  });
  const dispatch = fx.dispatch({ afterPurge });
  const host = fx.channelHost(dispatch, outbound);
  const message = (n: number, text: string): InboundMessage => ({
    conversationId: WCID,
    updateKey: `${CHANNEL}:${n}`,
    chatId: 't1',
    sender: { id: 'u1' },
    text,
    messageId: String(n),
  });
  return { host, message, keys: fx.keys(WCID) };
}

/** Texts of the replies stored in the conversation's stream. */
async function replies(key: string): Promise<string[]> {
  return (await fx.redis.xrange(key, '-', '+')).map(([, f]) => (JSON.parse(f[1]!) as { text: string }).text);
}

describe('after /purge on a webhook conversation', () => {
  it('the reply stream holding the notices expires with the tombstone', async () => {
    const { host, message, keys } = setup('refuse');
    await host.receive(CHANNEL, message(1, 'hello'));
    await host.receive(CHANNEL, message(2, '/purge stop'));
    await host.receive(CHANNEL, message(3, 'are you there?'));
    const texts = await replies(keys.replies);
    expect(texts).toHaveLength(2);
    expect(texts[0]).toMatch(/^Deleted this conversation/);
    expect(texts[1]).toBe(PURGED_NOTICE);
    const tombstone = await fx.redis.pttl(keys.tombstone);
    const stream = await fx.redis.pttl(keys.replies);
    expect(stream).toBeGreaterThan(0);
    expect(stream).toBeLessThanOrEqual(tombstone);
    expect(tombstone - stream).toBeLessThan(60_000);
    // The same expiry to the millisecond.
    const tombstoneEnds = await fx.redis.pexpiretime(keys.tombstone);
    expect(tombstoneEnds).toBeGreaterThan(Date.now());
    expect(await fx.redis.pexpiretime(keys.replies)).toBe(tombstoneEnds);
  });

  it('a conversation restarted after the purge keeps its stream (no TTL)', async () => {
    const { host, message, keys } = setup('restart');
    await host.receive(CHANNEL, message(1, 'hello'));
    await host.receive(CHANNEL, message(2, '/purge stop'));
    expect(await fx.redis.pttl(keys.replies)).toBeGreaterThan(0);
    await host.receive(CHANNEL, message(3, 'a fresh start'));
    expect(await fx.redis.exists(keys.tombstone)).toBe(0);
    expect(await fx.redis.pttl(keys.replies)).toBe(-1);
  });
});
