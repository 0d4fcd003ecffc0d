/**
 * What a purge leaves of a conversation, end to end: the runner with
 * subagents on (the local agent against the fake model) delegates a task
 * that carries what the person said, and `/purge` runs through the host's
 * command set with every built-in feature's purge hook. Afterwards nothing
 * of the conversation's child conversations is left under the prefix. The
 * same holds on every other way a conversation goes: the host's purge from
 * code (`RunningApp.purge`), the console's purge (a Matrix thread's pointer
 * in its room goes too) and idle retention (the children expire with their
 * parent); another conversation keeps everything.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import { type StartedHost, startHost } from '../../host/main.js';
import { hostPurge } from '../../host/purge.js';
import matrixDefinition from '../../plugins/matrix/index.js';
import { pollsKey } from '../../plugins/matrix/keys.js';
import { keepPoll } from '../../plugins/matrix/poll-store.js';
import { operatorAccess } from '../../src/http/access.js';
import { declaredConversationKeys } from '../../src/plugin/storage.js';
import { type FakeMatrix, MATRIX_ALICE, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { offers, type Req, says, startSubagentWorld } from '../agent/subagent-world.js';
import { matrixPlugin } from '../channels/matrix-harness.js';
import { CONSOLE_TOKEN, consoleCall } from '../helpers/console-api.js';
import { builtinCommands, testHostFeatures } from '../helpers/host-features.js';
import { CID, RunnerHarness } from '../runner/harness.js';

let ai: FakeOpenAIServer;
let h: RunnerHarness;
let close: () => Promise<void>;

const SECRET = 'my diagnosis is zq-fibrosis';

describe('/purge of a conversation', () => {
  beforeEach(async () => {
    ({ ai, h, close } = await startSubagentWorld(2));
  });
  afterEach(() => close());

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
    const deps = { dispatch: h.dispatch, enqueue: async () => undefined, purge: hostPurge(h.dispatch.options, features) };
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
    const deps = { dispatch: h.dispatch, enqueue: async () => undefined, purge: hostPurge(h.dispatch.options, features) };
    expect((await commands.run(deps, { name: 'purge', args: '' }, h.source(), undefined)).reply).toMatch(/^Deleted this conversation/);
    expect(await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`)).toEqual([]);
  });
});

/** Scripts the fake model: a message with the secret delegates a task carrying it (and waits); anything else is answered. */
function scriptDelegation(): void {
  ai.script((req: Req) => {
    const afterTool = req.messages.at(-1)?.role === 'tool';
    if (!offers(req, 'delegate')) return { text: `Looked it up: ${SECRET}.` };
    if (afterTool) return { text: 'Done.' };
    return says(req, SECRET) ? { toolCalls: [{ name: 'delegate', args: { tasks: [`look up: ${SECRET}`], wait: true } }] } : { text: 'Hi.' };
  });
}

/** The person's message in `CID` delegates a task with the secret; returns once the run ended and its child is there. */
async function delegateSecret(): Promise<void> {
  scriptDelegation();
  const r = (await h.ingest(`please look up what ${SECRET} means`)) as { runId: string };
  expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
  await h.idle(15_000, CID);
  const children = await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`);
  expect(children).toHaveLength(1);
  expect(JSON.stringify(await h.redis.xrange(children[0]!, '-', '+'))).toContain(SECRET);
}

/** Every key of conversation `cid` (its slot), sorted. */
const slotKeys = async (cid: string) => (await h.redis.keys(`${h.prefix}:{c:${cid}}:*`)).sort();

/** The keys of the conversation and its children that are not an update's dedupe key (which holds only a seq and expires). */
async function leftOfConversationAndChildren(): Promise<string[]> {
  const keys = [...(await slotKeys(CID)), ...(await h.redis.keys(`${h.prefix}:{c:subagent:*`))];
  // Each expires (-2: it just did).
  for (const key of keys) expect(await h.redis.ttl(key)).not.toBe(-1);
  return keys.filter((k) => !k.includes('}:dedupe:')).sort();
}

/** Another person's conversation, which no purge of `CID` may touch. */
const OTHER = 'telegram:43';

describe('the host purge every other path goes through', () => {
  let http: HttpServer;
  let host: StartedHost;

  beforeEach(async () => {
    ({ ai, h, close } = await startSubagentWorld(2));
    const config = { ...h.ctx.config, subagents: { enabled: true, maxPerRun: 2, timeoutSeconds: 60 } };
    http = createHttpServer({ config, redis: h.ctx.redis, logger: h.ctx.logger });
    host = await startHost({ ...h.ctx, config, http }, { channels: [], steeringCapable: true, features: hostFeatures() });
  });
  afterEach(async () => {
    await host.stop();
    await http.close();
    await close();
  });

  it("from code (RunningApp.purge, as the console and CLI purge) deletes its subagents' child conversations; another conversation keeps everything", async () => {
    await delegateSecret();
    const other = (await h.ingest('hello', { conversationId: OTHER })) as { runId: string };
    await h.runEnded(other.runId, 20_000, OTHER);
    await h.idle(15_000, OTHER);
    const otherKeys = await slotKeys(OTHER);

    expect((await host.purge(CID)).kind).toBe('purged');

    // Only what every purge leaves: tombstones and dedupe keys, expiring, holding no one's words.
    const left = await leftOfConversationAndChildren();
    expect(left.map((k) => k.slice(k.indexOf('}:') + 2))).toEqual(['tombstone', 'tombstone']);
    expect(await slotKeys(OTHER)).toEqual(otherKeys);
    expect(JSON.stringify(await h.redis.xrange(`${h.prefix}:{c:${OTHER}}:log`, '-', '+'))).toContain('hello');
  });
});

describe('idle retention of a conversation', () => {
  beforeEach(async () => {
    ({ ai, h, close } = await startSubagentWorld(2, { idleTtlSeconds: 1 }));
  });
  afterEach(() => close());

  it("expires its subagents' child conversations and its runs' sets of children with it; another conversation keeps everything", async () => {
    // Another conversation with a command recorded and no run: retention, run at a run's end, never touches it.
    expect((await h.dispatch.setPolicy(h.source(OTHER), 'collect')).kind).not.toBe('purged');
    const otherKeys = await slotKeys(OTHER);
    await delegateSecret();

    await waitFor(async () => (await h.redis.exists(`${h.prefix}:{c:${CID}}:meta`)) === 0 || undefined, 15_000, 'the conversation expired');
    // Retention counts whole seconds: its children go within a second of it.
    const gone = async () => ((await leftOfConversationAndChildren()).length === 0 ? [] : undefined);
    await waitFor(gone, 2000, 'the children expired').catch(() => undefined);
    expect(await leftOfConversationAndChildren()).toEqual([]);
    expect(await slotKeys(OTHER)).toEqual(otherKeys);
    for (const key of otherKeys.filter((k) => !k.includes('}:dedupe:'))) expect(await h.redis.ttl(key)).toBe(-1);
  });
});

describe('the console purge of a Matrix thread', () => {
  let matrix: FakeMatrix;
  let http: HttpServer;
  let host: StartedHost;

  beforeEach(async () => {
    matrix = await startFakeMatrix();
    h = await RunnerHarness.start();
    const plugin = matrixPlugin(h, matrix);
    http = createHttpServer({ config: h.ctx.config, redis: h.ctx.redis, logger: h.ctx.logger });
    const parts = { channels: [plugin], steeringCapable: true, pluginKeys: declaredConversationKeys([matrixDefinition]), features: hostFeatures() };
    host = await startHost({ ...h.ctx, http, operatorAccess: operatorAccess(CONSOLE_TOKEN) }, parts);
  });
  afterEach(async () => {
    await host.stop();
    await http.close();
    await h.close();
    await matrix.close();
  });

  it("deletes its room's pointer at the thread's poll; the room's own poll and another thread's pointer stay", async () => {
    const room = matrix.directRoom(MATRIX_ALICE);
    const roomCid = `matrix:${room}`;
    const thread = `${roomCid}/$root-a`;
    const otherThread = `${roomCid}/$root-b`;
    const answers = { a1: `/choose ${SECRET}` };
    await h.ingest(SECRET, { conversationId: thread });
    for (const [conversationId, pollId] of [
      [thread, '$poll-a'],
      [otherThread, '$poll-b'],
      [roomCid, '$poll-room'],
    ] as const)
      await keepPoll(h.redis, h.prefix, 'matrix', { conversationId, pollId, answers });
    expect(Object.keys(await h.redis.hgetall(pollsKey(h.prefix, roomCid))).sort()).toEqual(['$poll-a', '$poll-b', '$poll-room']);

    const res = await consoleCall(http, 'POST', `/conversations/${encodeURIComponent(thread)}/actions`, { action: 'purge', arg: 'stop' });
    expect(res).toMatchObject({ status: 200, body: { message: expect.stringMatching(/^Deleted this conversation/) } });

    expect(await h.redis.keys(`${h.prefix}:{c:${thread}}:*`)).toEqual(expect.not.arrayContaining([expect.stringMatching(/:(log|p:matrix:polls)$/)]));
    expect(Object.keys(await h.redis.hgetall(pollsKey(h.prefix, roomCid))).sort()).toEqual(['$poll-b', '$poll-room']);
    expect(await h.redis.hexists(pollsKey(h.prefix, otherThread), '$poll-b')).toBe(1);
  });
});
