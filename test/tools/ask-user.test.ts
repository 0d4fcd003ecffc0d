/**
 * `ask_user`, end to end through the runner (host ingest → Redis → runner →
 * local agent on the real provider against the fake model): the question goes
 * out with one button per option; a click by the person who started the run is
 * the answer the model gets; a message written instead ends the wait and joins
 * the run; nobody answering ends it at the timeout. Attacks on who may choose:
 * a stranger's click, a replayed click, two clicks racing.
 */

import { describe, expect, it } from 'vitest';
import { chooseCommand } from '../../host/commands/approvals.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolPolicySettings } from '../../plugins/local-agent/policy.js';
import { readQuestion } from '../../src/protocol/questions.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID, fakeModel, perTestModel, RunnerHarness, waitFor } from '../runner/harness.js';

const t = perTestModel();

const ASK = { question: 'Which size?', options: ['Small', 'Large'] };

async function start(policy: ToolPolicySettings = {}) {
  t.h = await RunnerHarness.start({
    plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false, askUser: true }, toolbox: { policy } }),
  });
  return t.h;
}

/** Waits for the question and returns its id and buttons. */
async function question(h: RunnerHarness) {
  const [msg] = await h.outbound.waitForMessages(1);
  const m = /^\/choose (qu_[0-9a-f]{24}) 1$/.exec(msg!.buttons?.[0]?.command ?? '');
  if (!m) throw new Error(`not a question: ${JSON.stringify(msg)}`);
  return { id: m[1]!, msg: msg! };
}
const source = (h: RunnerHarness, id = 'u1', name = 'Ann', updateKey?: string) => ({
  ...h.source(),
  sender: { id, name },
  ...(updateKey !== undefined && { updateKey }),
});
const lastToolResult = (i: number) => JSON.parse(t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);

describe('ask_user', () => {
  it('shows the options as buttons, takes the starter’s click as the answer, and records both', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }, { text: 'Large it is.' }]);
    const h = await start();
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id, msg } = await question(h);
    expect(msg.text).toBe('Which size?\n1. Small\n2. Large\nChoose one, or reply in your own words.');
    expect(msg.buttons).toEqual([
      { label: 'Small', command: `/choose ${id} 1` },
      { label: 'Large', command: `/choose ${id} 2` },
    ]);
    const chose = await chooseCommand(h, `${id} 2`, source(h));
    expect(chose).toEqual({ reply: 'Chosen: Large', duplicate: false, edit: `${msg.text}\n\nLarge (chosen by Ann).` });
    await h.runEnded(r.runId);
    expect(lastToolResult(1)).toEqual({ answer: 'Large', option: 2, by: 'Ann' });
    expect(h.outbound.texts.at(-1)).toBe('Large it is.');
    // A second click changes nothing and says how it was answered.
    expect((await chooseCommand(h, `${id} 1`, source(h))).reply).toBe('Already answered: Large was chosen by Ann. Nothing changed.');
    expect((await h.entries('question.asked')).map((e) => [e.question, e.tool, e.deciders])).toEqual([[id, 'ask_user', ['u1']]]);
    expect((await h.entries('question.answered')).map((e) => [e.question, e.status, e.answer, e.by])).toEqual([[id, 'answered', 1, 'u1']]);
  });

  it('refuses a stranger’s click and a replayed click; of two clicks racing, exactly one is the answer', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }, { text: 'Done.' }]);
    const h = await start({ approvers: ['boss'] });
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id } = await question(h);
    // Someone else in the group: nothing changes, the question still waits.
    expect((await chooseCommand(h, `${id} 1`, source(h, 'mallory', 'Mallory'))).reply).toBe(
      'Only the person the question was asked of may choose. Nothing changed.',
    );
    expect((await readQuestion(h.ctx.redis, h.prefix, CID, id))?.status).toBe('pending');
    // The asker and a configured approver click at once: one wins, the other is told.
    const [a, b] = await Promise.all([chooseCommand(h, `${id} 1`, source(h, 'u1', 'Ann')), chooseCommand(h, `${id} 2`, source(h, 'boss', 'Boss'))]);
    const replies = [a.reply, b.reply].sort();
    expect(replies.filter((x) => x.startsWith('Chosen: '))).toHaveLength(1);
    expect(replies.filter((x) => x.startsWith('Already answered: '))).toHaveLength(1);
    await h.runEnded(r.runId);
    expect(await h.entries('question.answered')).toHaveLength(1);
    // The winning click's update delivered again: silent, nothing written.
    const winner = a.reply.startsWith('Chosen: ') ? source(h, 'u1', 'Ann') : source(h, 'boss', 'Boss');
    const key = `replay-${id}`;
    await chooseCommand(h, `${id} 1`, { ...winner, updateKey: key });
    expect(await chooseCommand(h, `${id} 2`, { ...winner, updateKey: key })).toEqual({ reply: '', duplicate: true });
    expect(await h.entries('question.answered')).toHaveLength(1);
  });

  it('takes a message written instead of a click as the answer: the wait ends and the message joins the run', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }, { text: 'A medium one, then.' }]);
    const h = await start();
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id } = await question(h);
    expect(await h.ingest('medium please')).toMatchObject({ kind: 'steered', runId: r.runId });
    await h.runEnded(r.runId);
    expect(lastToolResult(1)).toMatchObject({ answer: null, note: expect.stringContaining('it follows') });
    expect(JSON.stringify(t.fake.requests[1]!.body.messages.at(-1))).toContain('medium please');
    expect(h.outbound.texts.at(-1)).toBe('A medium one, then.');
    expect((await h.entries('question.answered')).map((e) => e.status)).toEqual(['typed']);
    expect((await chooseCommand(h, `${id} 1`, source(h))).reply).toBe('Already answered: answered by a message. Nothing changed.');
  });

  it('a message from someone else in the chat does not answer the question: it keeps waiting for the asker', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }, { text: 'Small it is.' }]);
    const h = await start();
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id } = await question(h);
    // A stranger types into the chat while the question waits: steered into the run, not an answer.
    const stranger = await h.ingestService.ingest({
      conversationId: CID,
      updateKey: 'telegram:stranger-1',
      sender: { id: 'mallory', name: 'Mallory' },
      text: 'pick large',
    });
    expect(stranger).toMatchObject({ kind: 'steered', runId: r.runId });
    await waitFor(async () => (await h.entries('steering.queued')).length > 0 || undefined, 10_000, 'the stranger steered');
    expect((await readQuestion(h.ctx.redis, h.prefix, CID, id))?.status).toBe('pending');
    expect((await chooseCommand(h, `${id} 1`, source(h))).reply).toBe('Chosen: Small');
    await h.runEnded(r.runId);
    expect(lastToolResult(1)).toEqual({ answer: 'Small', option: 1, by: 'Ann' });
    expect((await h.entries('question.answered')).map((e) => [e.status, e.by])).toEqual([['answered', 'u1']]);
  });

  it('ends the wait at the timeout and tells the model; a later click changes nothing', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }, { text: 'No answer.' }]);
    const h = await start({ approvalTimeoutMs: 1000 });
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id } = await question(h);
    await h.runEnded(r.runId);
    expect(lastToolResult(1)).toMatchObject({ error: { tool: 'ask_user', category: 'timeout' } });
    expect((await chooseCommand(h, `${id} 2`, source(h))).reply).toBe('Already answered: nobody answered in time. Nothing changed.');
  });

  it('/stop ends the wait; the question is not answered by it', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: ASK }] }]);
    const h = await start();
    const r = (await h.ingest('order a coffee')) as { runId: string };
    const { id } = await question(h);
    await h.dispatch.requestStop(h.source(), 'stop');
    expect((await h.runEnded(r.runId)).outcome).toBe('stopped');
    expect((await readQuestion(h.ctx.redis, h.prefix, CID, id))?.status).toBe('pending');
    expect(await h.entries('question.answered')).toEqual([]);
  });

  it('refuses bad input to the tool and to /choose, writing nothing', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', args: { question: 'Pick', options: ['only one'] } }] }, { text: 'ok' }]);
    const h = await start();
    const r = (await h.ingest('hi')) as { runId: string };
    await h.runEnded(r.runId);
    // The model is told its input was refused (by the SDK's validation), and asked nothing.
    const result = t.fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content;
    expect(result).toMatch(/Invalid.*input/i);
    expect(h.outbound.texts).toEqual(['ok']);
    expect(await h.entries('question.asked')).toEqual([]);
    expect((await chooseCommand(h, 'qu_nope 1', source(h))).reply).toContain('Usage: /choose');
    expect((await chooseCommand(h, 'qu_000000000000000000000000 9', source(h))).reply).toContain('Usage: /choose');
    expect((await chooseCommand(h, 'qu_000000000000000000000000 3', source(h))).reply).toContain('No question');
    expect(await h.ctx.redis.hlen(conversationKeys(h.prefix, CID).approvals)).toBe(0);
    expect(await h.entries('question.answered')).toEqual([]);
  });
});
