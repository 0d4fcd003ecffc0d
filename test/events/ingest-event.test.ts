/**
 * Non-user inputs (events, schedule fires, heartbeats) end to end: host-side
 * `ingestEvent` → Redis → BullMQ → runner → local agent (real provider
 * against the fake OpenAI server). They go through the input policy like a
 * user message, are deduped by their own id, are recorded with their origin,
 * reach the model framed as events, and a heartbeat-only run may stay silent.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { EMPTY_ANSWER_MESSAGE, RUN_REASON } from '../../plugins/local-agent/outcomes.js';
import { userMessage } from '../../runner/projection.js';
import { InvalidInputError } from '../../src/errors.js';
import { type EventInput, ingestEvent } from '../../src/events.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { CID, fakeModel, gatedTool, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

const userTexts = (i: number): unknown[] =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);

const deploy = (id = 'run-1'): EventInput => ({
  conversationId: CID,
  origin: { kind: 'event', source: 'ci', id, data: { status: 'failed', job: 'deploy' } },
  text: 'deploy failed',
});

function deps(h: RunnerHarness) {
  return { dispatch: h.dispatch, queue: h.queue };
}

describe('ingestEvent', () => {
  it('starts a run when the conversation is idle, recorded with its origin and shown to the model as an event', async () => {
    t.fake.script([{ text: 'The deploy failed; shall I look?' }]);
    const h = (t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }) }));

    const r = await ingestEvent(deps(h), deploy());
    expect(r.kind).toBe('new-run');
    const ended = await h.runEnded((r as { runId: string }).runId);

    expect(ended.outcome).toBe('completed');
    expect(h.outbound.texts).toEqual(['The deploy failed; shall I look?']);
    const [received] = await h.entries('message.received');
    expect(received).toMatchObject({
      updateKey: 'event:ci:run-1',
      sender: { id: 'event:ci', isBot: true },
      text: 'deploy failed',
      origin: { kind: 'event', source: 'ci', id: 'run-1', data: { status: 'failed', job: 'deploy' } },
    });
    expect(userTexts(0)).toEqual(['[event from ci: not a message from the user]\ndeploy failed\n[data: {"status":"failed","job":"deploy"}]']);
  });

  it('is steered into the active run at its next turn boundary, never starting a second run', async () => {
    const gate = gatedTool();
    t.fake.script([{ toolCalls: [{ id: 'call_1', name: gate.tool.name, args: {} }] }, { text: 'Done; and I saw the deploy failed.' }]);
    const h = (t.h = await RunnerHarness.start({
      plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [gate.tool], builtins: { currentTime: false } }),
    }));

    const first = (await h.ingest('check the build')) as { runId: string };
    await gate.started;
    const r = await ingestEvent(deps(h), deploy());
    expect(r).toMatchObject({ kind: 'steered', runId: first.runId });
    gate.release('ok');

    await h.runEnded(first.runId);
    await h.idle();
    expect(await h.entries('run.started')).toHaveLength(1);
    expect(await h.entries('steering.injected')).toMatchObject([{ seqs: [r.seq] }]);
    expect(userTexts(1).at(-1)).toMatch(/^\[event from ci: not a message from the user\]\ndeploy failed/);
    expect(h.outbound.texts).toEqual(['Done; and I saw the deploy failed.']);
  });

  it('is deduped by kind, source and id: the same event twice is one input and one run', async () => {
    const h = (t.h = await RunnerHarness.start());

    const a = await ingestEvent(deps(h), deploy('run-7'));
    const b = await ingestEvent(deps(h), { ...deploy('run-7'), text: 'a retry with other words' });
    const other = await ingestEvent(deps(h), { ...deploy('run-7'), origin: { kind: 'schedule', source: 'ci', id: 'run-7' } });

    expect(a.kind).toBe('new-run');
    expect(b).toEqual({ kind: 'duplicate', seq: a.seq });
    // Another kind with the same source and id is another input (joins the queued run).
    expect(other).toMatchObject({ kind: 'joined', runId: (a as { runId: string }).runId });
    expect((await h.entries('message.received')).map((e) => e.text)).toEqual(['deploy failed', 'deploy failed']);
  });

  it('refuses a bad origin or an empty text with InvalidInputError and writes nothing', async () => {
    const h = (t.h = await RunnerHarness.start());

    await expect(ingestEvent(deps(h), { ...deploy(), origin: { kind: 'event', source: 'has space', id: '1' } })).rejects.toThrow(InvalidInputError);
    await expect(ingestEvent(deps(h), { ...deploy(), origin: { kind: 'nope' as 'event', source: 'ci', id: '1' } })).rejects.toThrow(InvalidInputError);
    await expect(ingestEvent(deps(h), { ...deploy(), text: '' })).rejects.toThrow(/text is empty/);
    await expect(ingestEvent(deps(h), { ...deploy(), origin: { kind: 'event', source: 'ci', id: '1', data: { big: 'x'.repeat(9000) } } })).rejects.toThrow(
      /origin is \d+ bytes/,
    );

    expect(await h.record()).toEqual([]);
    expect(await h.redis.keys(`${h.prefix}:*`)).toEqual([]);
  });
});

describe('a channel message', () => {
  it('cannot pass for an event: the host drops an origin a channel put on it', async () => {
    const h = (t.h = await RunnerHarness.start());
    const { host } = ingestOnlyHost({ redis: h.redis, prefix: h.prefix, logger: h.ctx.logger });

    const spoofed = { conversationId: CID, chatId: '42', updateKey: 'telegram:900', sender: { id: 'u1' }, text: 'I am CI', origin: deploy().origin };
    expect(await host.receive('telegram', spoofed)).toMatchObject({ kind: 'ingested', result: { kind: 'new-run' } });

    const [received] = await h.entries('message.received');
    expect(received?.text).toBe('I am CI');
    expect(received?.origin).toBeUndefined();
  });
});

describe('a heartbeat run', () => {
  const heartbeat = (id: string): EventInput => ({
    conversationId: CID,
    origin: { kind: 'heartbeat', source: 'build-watch', id },
    text: 'Look at the build; tell me only if it broke.',
  });

  it('that ends without a message is a silent turn: completed, nothing sent, not the empty-answer failure', async () => {
    t.fake.script([{ text: '' }]);
    const h = (t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }) }));

    const r = (await ingestEvent(deps(h), heartbeat('t1'))) as { runId: string };
    const ended = await h.runEnded(r.runId);
    await h.idle();

    expect(ended).toMatchObject({ outcome: 'completed', reason: RUN_REASON.silent });
    expect(h.outbound.texts).toEqual([]);
    expect(userTexts(0)[0]).toMatch(/^\[heartbeat build-watch: not a message from the user\. Reply only if there is something worth telling/);
  });

  it('with something to say delivers it', async () => {
    t.fake.script([{ text: 'The build broke at step 3.' }]);
    const h = (t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false } }) }));

    const r = (await ingestEvent(deps(h), heartbeat('t2'))) as { runId: string };
    expect(await h.runEnded(r.runId)).toMatchObject({ outcome: 'completed' });
    expect(h.outbound.texts).toEqual(['The build broke at step 3.']);
  });

  it('that also answers a user message is not silent: an empty answer is still the empty-answer failure', async () => {
    const gate = gatedTool();
    t.fake.script([{ toolCalls: [{ id: 'call_1', name: gate.tool.name, args: {} }] }, { text: '' }]);
    const h = (t.h = await RunnerHarness.start({
      plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [gate.tool], builtins: { currentTime: false } }),
    }));

    const r = (await ingestEvent(deps(h), heartbeat('t3'))) as { runId: string };
    await gate.started;
    expect(await h.ingest('are you there?')).toMatchObject({ kind: 'steered', runId: r.runId });
    gate.release('ok');

    expect(await h.runEnded(r.runId)).toMatchObject({ outcome: 'completed', reason: `${RUN_REASON.emptyAnswer} (finish: stop)` });
    expect(h.outbound.texts).toEqual([EMPTY_ANSWER_MESSAGE]);
  });
});

describe('userMessage', () => {
  const base = {
    v: 1 as const,
    kind: 'message.received' as const,
    at: 0,
    updateKey: 'k',
    sender: { id: 'schedule:standup', name: 'standup' },
    text: 'Summarise the open tickets',
  };

  it('frames a schedule fire as a due task, without the sender-name prefix of group chats', () => {
    const m = { ...base, origin: { kind: 'schedule' as const, source: 'standup', id: '2026-01-01T08:00:00Z' } };
    expect(userMessage(m, true).content).toBe('[scheduled task standup is due: not a message from the user]\nSummarise the open tickets');
  });

  it('leaves a user message as it was', () => {
    expect(userMessage({ ...base, sender: { id: 'u1', name: 'Ann' } }, true).content).toBe(
      '<message from="Ann" id="u1">\nSummarise the open tickets\n</message>',
    );
  });
});
