/**
 * A run can tell who it is for and who sent its inputs: `RunContext.features.identities`
 * names the accountable identity and resolves an input's sender through the conversation's channel, links included.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunContext, RunnerPlugin } from '../../runner/plugin.js';
import { IdentityStore } from '../../src/people/identity.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { redisUrl } from '../helpers/redis.js';

let h: RunnerHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Answers with the channel, the run's accountable identity and the identity of each input's sender. */
function whoPlugin(): RunnerPlugin {
  return {
    manifest: { name: 'who', version: '1.0.0', capabilities: { steering: false, state: false } },
    async run(ctx: RunContext) {
      const ids = ctx.features.identities;
      const who = ids ? await Promise.all(ctx.inputs.map((m) => ids.resolve(m.sender.id))) : ['none'];
      await ctx.delivery.message(`${ids?.channel ?? '-'} ${ids?.accountable ?? '-'} ${who.join(',')}`);
      return { outcome: 'completed' };
    },
  };
}

describe('RunContext.features.identities', () => {
  it('names the run for and resolves the sender to `<channel>:<user id>`, then to the linked identity', async () => {
    h = await RunnerHarness.start({ redisUrl: redisUrl(), plugin: whoPlugin() });
    const first = await h.ingest('hello');
    expect(first.kind).toBe('new-run');
    await h.runEnded((first as { runId: string }).runId);
    await h.outbound.waitForMessages(1);
    expect(h.outbound.texts[0]).toBe('telegram telegram:u1 telegram:u1');

    await new IdentityStore({ redis: h.ctx.redis, prefix: h.prefix }).link('telegram:u1', 'discord:77');
    const second = await h.ingest('again');
    await h.runEnded((second as { runId: string }).runId);
    await h.outbound.waitForMessages(2);
    expect(h.outbound.texts[1]).toBe('telegram discord:77 discord:77');
  });
});
