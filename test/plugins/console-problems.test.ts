/** The console asks a conversation's channel (found by the longest registered id) what is wrong with it. */
import { describe, expect, it } from 'vitest';
import { ConsoleReads } from '../../host/console/reads.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { RunQueue } from '../../src/protocol/run-queue.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

/** A channel that reports one problem per conversation it is asked about. */
function channel(id: string, asked: string[]): ChannelPlugin {
  return {
    id,
    outbound: { channelId: id, maxMessageChars: 100, send: async () => ({ messageId: '1' }) },
    start: async () => undefined,
    stop: async () => undefined,
    conversationProblems: async (conversationId) => {
      asked.push(conversationId);
      return [`${id} is behind`];
    },
  };
}

describe('console conversation rows', () => {
  it("list the problems of the conversation's channel, asking only that channel", async () => {
    const asked: Record<string, string[]> = { short: [], long: [] };
    const reads = new ConsoleReads({
      redis: fx.redis,
      prefix: fx.prefix,
      dispatch: fx.dispatch(),
      // No run is queued in this test: the queue is never asked for a job.
      queue: {} as RunQueue,
      channels: [channel('hooks', asked.short!), channel('hooks:crm', asked.long!)],
    });
    const row = await reads.row('hooks:crm:ticket-1', Date.now());
    expect(row.channel).toBe('hooks:crm');
    expect(row.stuck).toEqual(['hooks:crm is behind']);
    expect(asked).toEqual({ short: [], long: ['hooks:crm:ticket-1'] });
  });

  it('show a failing check as a problem, not an error', async () => {
    const failing: ChannelPlugin = { ...channel('hooks', []), conversationProblems: async () => Promise.reject(new Error('secret-ish detail')) };
    const reads = new ConsoleReads({ redis: fx.redis, prefix: fx.prefix, dispatch: fx.dispatch(), queue: {} as RunQueue, channels: [failing] });
    expect((await reads.row('hooks:1', Date.now())).stuck).toEqual(['channel check failed']);
  });
});
