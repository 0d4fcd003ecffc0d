/**
 * What an export leaves out, end to end: the runner with subagents on (the
 * local agent against the fake model) delegates a task that carries what the
 * person said, and the child's record keeps it. `/purge` deletes the child
 * with its parent (purge-leftovers.test.ts), so the export a person gets
 * before it ("everything stored about a conversation or a person",
 * docs/people.md#export) must hold it too, and a person's export where the
 * conversation is not theirs alone must not.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exportParts } from '../../app/features/index.js';
import { Exporter, type ExportOpening } from '../../src/export/exporter.js';
import { ConversationIndex } from '../../src/people/conversation-index.js';
import type { FakeOpenAIServer } from '../../testing/fakes/openai-server.js';
import { offers, type Req, says, startSubagentWorld } from '../agent/subagent-world.js';
import { CID, type RunnerHarness } from '../runner/harness.js';

let ai: FakeOpenAIServer;
let h: RunnerHarness;
let close: () => Promise<void>;

beforeEach(async () => {
  ({ ai, h, close } = await startSubagentWorld(2));
});
afterEach(() => close());

const SECRET = 'my diagnosis is zq-fibrosis';
const FOUND = 'zq-fibrosis is a made-up condition';

/** The exporter as `steerbot export` and the console build it. */
const exporter = () => new Exporter({ redis: h.redis, prefix: h.prefix, channels: ['telegram'], parts: exportParts({ redis: h.redis, prefix: h.prefix }) });

async function doc(opening: ExportOpening): Promise<any> {
  if (opening.kind !== 'found') throw new Error(`no export: ${opening.kind}`);
  let text = '';
  for await (const chunk of opening.chunks) text += chunk;
  return JSON.parse(text);
}

/** The person asks; the agent delegates a task with their words in it; the child answers. Returns the child's conversation id. */
async function delegated(): Promise<string> {
  ai.script((req: Req) => {
    if (!offers(req, 'delegate')) return { text: FOUND };
    if (req.messages.at(-1)?.role === 'tool') return { text: 'Done.' };
    return says(req, SECRET) ? { toolCalls: [{ name: 'delegate', args: { tasks: [`look up: ${SECRET}`], wait: true } }] } : { text: 'Hi.' };
  });
  const r = (await h.ingest(`please look up what ${SECRET} means`)) as { runId: string };
  expect((await h.runEnded(r.runId, 20_000)).outcome).toBe('completed');
  await h.idle(15_000, CID);
  // What the host notes as it records the person's message.
  await new ConversationIndex({ redis: h.redis, prefix: h.prefix }).note('telegram', 'u1', CID);
  const logs = await h.redis.keys(`${h.prefix}:{c:subagent:*}:log`);
  expect(logs).toHaveLength(1);
  return logs[0]!.slice(logs[0]!.indexOf('{c:') + 3, logs[0]!.indexOf('}:'));
}

describe('an export', () => {
  it("holds the conversation's subagent child conversations, which hold the tasks it delegated and what they found, as the purge deletes them", async () => {
    const child = await delegated();

    const conversation = await doc(await exporter().conversation(CID));
    expect(conversation.subagents.map((c: { conversation: string }) => c.conversation)).toEqual([child]);
    const [sub] = conversation.subagents;
    expect(JSON.stringify(sub.record)).toContain(`look up: ${SECRET}`);
    expect(JSON.stringify(sub.record)).toContain(FOUND);
    expect(sub.runs).toEqual([expect.objectContaining({ outcome: 'completed' })]);

    // The person's export, where the conversation is theirs whole, holds the same.
    const person = await doc(await exporter().identity('telegram:u1'));
    const [direct] = person.conversations;
    expect(direct).toMatchObject({ conversation: CID, scope: 'full' });
    expect(direct.subagents.map((c: { conversation: string }) => c.conversation)).toEqual([child]);
    expect(JSON.stringify(direct.subagents[0].record)).toContain(`look up: ${SECRET}`);

    // Someone else writes there too: a person's export of it is their own messages only, no child (its tasks mix everyone's).
    ai.script(() => ({ text: 'Noted.' }));
    await h.ingestService.ingest({ conversationId: CID, updateKey: 'telegram:other-1', sender: { id: 'u2', name: 'Bo' }, text: 'and mine is bo-only' });
    await h.idle(15_000, CID);
    await new ConversationIndex({ redis: h.redis, prefix: h.prefix }).note('telegram', 'u2', CID);
    const bo = await doc(await exporter().identity('telegram:u2'));
    expect(bo.conversations).toEqual([expect.objectContaining({ conversation: CID, scope: 'own-messages' })]);
    expect(bo.conversations[0].subagents).toBeUndefined();
    for (const theirs of [SECRET, child]) expect(JSON.stringify(bo)).not.toContain(theirs);
  });
});
