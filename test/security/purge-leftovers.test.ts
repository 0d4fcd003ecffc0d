/**
 * What `/purge` leaves of a conversation, end to end: the runner with
 * subagents on (the local agent against the fake model) delegates a task
 * that carries what the person said, and `/purge` runs through the host's
 * command set with every built-in feature's purge hook. Afterwards nothing
 * of the conversation's child conversations is left under the prefix.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { purgingOf } from '../../host/feature.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { offers, type Req, says, startSubagentWorld } from '../agent/subagent-world.js';
import { builtinCommands, testHostFeatures } from '../helpers/host-features.js';
import { CID, type RunnerHarness } from '../runner/harness.js';

let ai: FakeOpenAIServer;
let h: RunnerHarness;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ ai, h, close } = await startSubagentWorld(2));
});
afterEach(() => close());

const SECRET = 'my diagnosis is zq-fibrosis';

describe('/purge of a conversation', () => {
  it("deletes its subagents' child conversations, which hold the tasks it delegated", async () => {
    ai.script((req: Req) => {
      const afterTool = req.messages.at(-1)?.role === 'tool';
      if (!offers(req, 'delegate')) return { text: `Looked it up: ${SECRET}.` };
      if (afterTool) return { text: 'Done.' };
      return says(req, SECRET) ? { toolCalls: [{ name: 'delegate', args: { tasks: [`look up: ${SECRET}`], wait: true } }] } : { text: 'Hi.' };
    });
    const r = (await h.ingest(`please look up what ${SECRET} means`)) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    await h.idle(15_000, CID);
    const children = await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`);
    expect(children).toHaveLength(1);
    // The child's record holds the task, the person's words in it.
    expect(JSON.stringify(await h.redis.xrange(children[0]!, '-', '+'))).toContain(SECRET);

    const config = { ...h.ctx.config, subagents: { enabled: true, maxPerRun: 2, timeoutSeconds: 60 } };
    const features = await testHostFeatures({ config, redis: h.redis, prefix: h.prefix });
    const commands = await builtinCommands({ config, redis: h.redis, prefix: h.prefix });
    const deps = { dispatch: h.dispatch, enqueue: async () => undefined, purging: purgingOf(features) };
    const out = await commands.run(deps, { name: 'purge', args: '' }, h.source(), undefined);
    expect(out.reply).toMatch(/^Deleted this conversation/);

    expect(await h.redis.keys(`${h.prefix}:{c:${CID}}:log`)).toEqual([]);
    // Only what every purge leaves: the child's tombstone and dedupe key, both expiring, neither holding a word.
    const left = await h.redis.keys(`${h.prefix}:{c:subagent:*`);
    expect(left.map((k) => k.slice(k.indexOf('}:') + 2)).sort()).toEqual(['dedupe:event:delegate:task', 'tombstone']);
    for (const key of left) expect(await h.redis.ttl(key)).toBeGreaterThan(0);
    // Nor do the parent's runs keep their sets of children.
    expect(await h.redis.keys(`${h.prefix}:{c:${CID}}:run:*`)).toEqual([]);
  });

  it('deletes every child a run started, also after subagents.maxPerRun was lowered', async () => {
    ai.script((req: Req) => {
      const afterTool = req.messages.at(-1)?.role === 'tool';
      if (!offers(req, 'delegate')) return { text: `Looked it up: ${SECRET}.` };
      if (afterTool) return { text: 'Done.' };
      return says(req, SECRET) ? { toolCalls: [{ name: 'delegate', args: { tasks: [`one: ${SECRET}`, `two: ${SECRET}`], wait: true } }] } : { text: 'Hi.' };
    });
    const r = (await h.ingest(`please look up what ${SECRET} means`)) as { runId: string };
    expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
    await h.idle(15_000, CID);
    expect(await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).toHaveLength(2);

    // The operator lowered the limit since: the second child's id is past what the new limit would name.
    const config = { ...h.ctx.config, subagents: { enabled: true, maxPerRun: 1, timeoutSeconds: 60 } };
    const features = await testHostFeatures({ config, redis: h.redis, prefix: h.prefix });
    const commands = await builtinCommands({ config, redis: h.redis, prefix: h.prefix });
    const deps = { dispatch: h.dispatch, enqueue: async () => undefined, purging: purgingOf(features) };
    expect((await commands.run(deps, { name: 'purge', args: '' }, h.source(), undefined)).reply).toMatch(/^Deleted this conversation/);
    expect(await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).toEqual([]);
  });
});
