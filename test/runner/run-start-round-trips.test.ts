/**
 * What a run costs in Redis before its model call: the sequential round
 * trips from the acquire to the model request. The acquire reads what the
 * attempt starts from in its own call (the inputs and the prompt's head:
 * checkpoint and meta fields), and the record read goes out beside the
 * starter's identity read, so a run reaches its model in two: acquire, record.
 * A run of more than 256 inputs (the most the acquire reads) reads them itself.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { CHECKPOINT_KEY } from '../../runner/compaction/checkpoint.js';
import { UNANSWERED_KEY } from '../../src/record/unanswered.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { scriptSource } from '../../src/scripts/index.js';
import { CID, fakeModel, perTestModel, RunnerHarness } from './harness.js';

const t = perTestModel();
const sha = (name: 'acquire' | 'heartbeat') => createHash('sha1').update(scriptSource(name)).digest('hex');

/** One command the runner sent on the conversation's slot or the people's. */
interface Sent {
  name: string;
  args: string[];
  /** The round trip it went out in: a command sent while none of the recorded ones was in flight starts the next. */
  wave: number;
}

/**
 * Records the commands `client` sends that touch the conversation or the
 * identity links (a lease heartbeat left out: it runs on its own timer), and
 * numbers their round trips.
 */
function recordWaves(client: Redis): Sent[] {
  const sent: Sent[] = [];
  let inFlight = 0;
  let wave = 0;
  const heartbeat = sha('heartbeat');
  const orig = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof orig>) => {
    const command = args[0];
    const flat = command.args.map(String);
    const ours = flat.some((a) => a.includes(`{c:${CID}}`) || a.includes('{people}')) && flat[0] !== heartbeat;
    const reply = orig(...args);
    if (!ours) return reply;
    if (inFlight === 0) wave++;
    inFlight++;
    sent.push({ name: command.name, args: flat, wave });
    const settled = () => {
      inFlight--;
    };
    void Promise.resolve(reply).then(settled, settled);
    return reply;
  }) as typeof client.sendCommand;
  return sent;
}

describe('a run before its model call', () => {
  it('reaches the model in two round trips after it is picked up: the acquire, which reads the inputs and the prompt head, then the record read beside the identity read', async () => {
    // The answer waits: the wait for the request resolves in the tick the fake receives it, long before the
    // answer's timer, so nothing the runner sends after the model call is among the commands read below.
    t.fake.script([{ text: 'Hello Ann!', delayMs: 500 }]);
    t.h = await RunnerHarness.start();
    const sent = recordWaves(t.h.redis as Redis);
    await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }));

    await t.h.ingest('hi there');
    await t.fake.waitForRequests(1);
    const acquired = sent.findIndex((s) => s.name.startsWith('eval') && s.args[0] === sha('acquire'));
    expect(acquired).toBeGreaterThanOrEqual(0);
    const before = sent.slice(acquired);
    const first = before[0]!.wave;
    const waves = new Map<number, Sent[]>();
    for (const s of before) waves.set(s.wave - first, [...(waves.get(s.wave - first) ?? []), s]);

    expect([...waves.keys()]).toEqual([0, 1]);
    const k = conversationKeys(t.h.prefix, CID);
    const acquire = waves.get(0)!;
    expect(acquire).toHaveLength(1);
    // The acquire's own call reads the state hash once (the checkpoint and the unanswered note) and the meta fields.
    expect(acquire[0]!.args.slice(-6)).toEqual(['2', CHECKPOINT_KEY, UNANSWERED_KEY, 'reset_seq', 'compact_requested', 'model']);
    expect(acquire[0]!.args).toContain(k.meta);
    const record = waves.get(1)!.map((s) => `${s.name} ${s.args[0]}`);
    expect(record).toEqual(expect.arrayContaining([`hget ${t.h.prefix}:{people}:links`, `xrevrange ${k.log}`]));
    expect(record).toHaveLength(2);
    await t.h.outbound.waitForMessages(1);
  });

  it('takes more than 256 inputs, which the acquire leaves to it, with one read of their entries: the model gets every message in order', async () => {
    t.fake.script([{ text: 'All read.' }]);
    t.h = await RunnerHarness.start();
    // No runner yet: the first message makes a queued run, and the 299 after it join it.
    const first = await t.h.ingest('message 1');
    for (let i = 2; i <= 300; i += 50) {
      const joined = await Promise.all(Array.from({ length: Math.min(50, 301 - i) }, (_, j) => t.h!.ingest(`message ${i + j}`)));
      expect(joined.every((r) => r.kind === 'joined')).toBe(true);
    }
    const sent = recordWaves(t.h.redis as Redis);
    await t.h.startRunner(createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }));

    expect((await t.h.runEnded((first as { runId: string }).runId)).outcome).toBe('completed');
    const users = t.fake.requests[0]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content);
    expect(users).toEqual(Array.from({ length: 300 }, (_, i) => `message ${i + 1}`));
    // The inputs' entries are read once, by seq, after the acquire returned none of them.
    const inputReads = sent.filter((s) => s.name === 'xrange' && s.args[0] === conversationKeys(t.h!.prefix, CID).log && s.args[1] === s.args[2]);
    const [started] = await t.h.entries('run.started');
    expect(started?.inputs).toHaveLength(300);
    expect(inputReads.map((s) => s.args[1])).toEqual(started!.inputs!.map((seq) => `${seq}-0`));
    expect(t.h.outbound.texts).toEqual(['All read.']);
  });
});
