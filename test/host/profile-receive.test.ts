/**
 * Agent profiles at the channel host: a profile's input policy routes its
 * conversations' messages, and `/status` names the profile in use.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createChannelHost } from '../../host/receive.js';
import type { ChannelOutbound, InboundMessage } from '../../src/channel.js';
import { loadProfiles } from '../../src/people/profiles.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

const outbound: ChannelOutbound & { texts: string[] } = {
  channelId: 'telegram',
  maxMessageChars: 4096,
  texts: [],
  async send(_cid, text) {
    this.texts.push(text);
    return { messageId: String(this.texts.length) };
  },
};

let n = 0;
const message = (conversationId: string, text: string): InboundMessage => ({
  conversationId,
  chatId: conversationId.split(':')[1]!,
  updateKey: `telegram:${++n}`,
  sender: { id: 'u1' },
  text,
});

async function host() {
  const profiles = await loadProfiles(
    { provider: 'openai', name: 'gpt-4o-mini', contextWindow: 128_000, outputReserve: 4096 },
    { queue: { inputPolicy: 'followup' } },
    [{ profile: 'queue', chat: 'telegram:7' }],
  );
  const dispatch = fx.dispatch();
  const channelHost = createChannelHost({
    routes: { add: () => undefined },
    redis: fx.redis,
    prefix: fx.prefix,
    logger: pino({ level: 'silent' }),
    dispatch,
    ingest: dispatch,
    enqueue: async () => undefined,
    outbound: () => outbound,
    features: [{ name: 'profiles', profile: async (_channel, cid) => profiles.resolve(cid) }],
  });
  return { channelHost, runs: fx.runs() };
}

describe('a conversation bound to a profile', () => {
  it("routes messages sent during a run by the profile's input policy, and /status names the profile", async () => {
    const { channelHost, runs } = await host();
    const first = await channelHost.receive('telegram', message('telegram:7', 'one'));
    const runId = (first as { result: { runId: string } }).result.runId;
    await runs.acquire('telegram:7', runId, 'w1', 30_000);
    // `followup`, not the default `steer`: the message waits for its own run.
    expect(await channelHost.receive('telegram', message('telegram:7', 'two'))).toMatchObject({ kind: 'ingested', result: { kind: 'pending' } });

    const status = await channelHost.receive('telegram', message('telegram:7', '/status'));
    expect((status as { reply: string }).reply).toContain('Agent profile: queue');
    const other = await channelHost.receive('telegram', message('telegram:8', '/status'));
    expect((other as { reply: string }).reply).toContain('Agent profile: default');
  });
});
