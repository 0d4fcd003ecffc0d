/**
 * `ask_user` end to end over Matrix: a message in a room → the fake
 * homeserver's `/sync` → the real Matrix plugin → the channel host → Redis →
 * BullMQ → runner with the local agent (real OpenAI-compatible provider, fake
 * model) → the question as a message and a native poll (MSC3381, one answer
 * per option) → a room member's poll response is their choice: someone else's
 * is refused (the host's check), the asker's is the answer and ends the poll.
 * Responses that answer no poll the bot waits on are ignored, writing nothing.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_BOB, MATRIX_TEST, type MatrixPoll, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { startMatrixSystem, untilSyncing } from '../channels/matrix-harness.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

const ASK = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };

let ai: FakeOpenAIServer;
let matrix: FakeMatrix;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let room: string;

beforeEach(async () => {
  ai = await startFakeOpenAI();
  matrix = await startFakeMatrix();
  h = await RunnerHarness.start();
  room = matrix.createRoom([MATRIX_TEST.userId, MATRIX_ALICE, MATRIX_BOB]);
  ({ http, plugin } = await startMatrixSystem({
    h,
    matrix,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false, askUser: true } }),
  }));
  await untilSyncing(matrix);
});
afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await matrix.close();
  await ai.close();
});

const CONVERSATION = () => `matrix:${room}`;
const nthText = async (n: number, what: string) => (await matrix.waitUntil(() => matrix.texts(room).length >= n && matrix.texts(room), 15_000, what))[n - 1]!;
const toolResult = (i: number) => JSON.parse(ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);
/** Waits until the bot has handled every event in the stream now (its next `/sync` starts after them). */
const handled = async () => {
  const now = matrix.position();
  await matrix.waitUntil(() => matrix.calls.some((c) => c.kind === 'sync' && c.query.since === now), 15_000, 'a /sync after the events');
};
/** Everything the conversation holds in Redis: its keys, and the length of its record. */
const written = async () => ({ keys: (await h.redis.keys(`${h.prefix}:{c:${CONVERSATION()}}*`)).sort(), log: await h.record(CONVERSATION()) });

/** Asks the plan question and returns the poll that came with it. */
async function askPlan(answer: string): Promise<MatrixPoll> {
  ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: answer }]);
  matrix.message(room, MATRIX_ALICE, 'book me a plan');
  expect(await nthText(1, 'the question')).toBe('Which plan?\n1. Basic\n2. Pro\n3. Team\nChoose one, or reply in your own words.');
  return matrix.waitUntil(() => matrix.polls(room)[0], 15_000, 'the poll');
}

describe('ask_user over Matrix', () => {
  it("shows the options as a poll; a stranger's response is refused, the asker's is the answer and ends the poll", async () => {
    const poll = await askPlan('Team plan booked.');
    expect(poll).toMatchObject({ question: 'Which plan?', kind: 'org.matrix.msc3381.poll.disclosed', maxSelections: 1 });
    expect(poll.answers.map((a) => a.label)).toEqual(ASK.options);
    expect(new Set(poll.answers.map((a) => a.id)).size).toBe(3);

    matrix.pollResponse(room, MATRIX_BOB, poll.eventId, [poll.answers[0]!.id]);
    expect(await nthText(2, 'the refusal')).toBe('Only the person the question was asked of may choose. Nothing changed.');
    expect(matrix.polls(room)[0]!.ended).toBeUndefined();

    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[2]!.id]);
    expect(await nthText(3, 'the answer')).toBe('Team plan booked.');
    expect(toolResult(1)).toMatchObject({ answer: 'Team', option: 3 });
    expect(matrix.polls(room)[0]!.ended).toContain('Team (chosen by');
    await h.idle(15_000, CONVERSATION());
    expect(matrix.texts(room)).toHaveLength(3);
    expect(ai.requests).toHaveLength(2);
  });

  it("asks in a thread with the poll in that thread; the response answers the thread's conversation", async () => {
    const root = matrix.message(room, MATRIX_BOB, 'plans thread');
    await nthText(1, 'the answer to the root');
    await h.idle(15_000, CONVERSATION());
    const thread = `matrix:${room}/${root.event_id}`;
    const inThread = { rel_type: 'm.thread', event_id: root.event_id, is_falling_back: true, 'm.in_reply_to': { event_id: root.event_id } };
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ASK }] }, { text: 'Basic, then.' }]);
    matrix.message(room, MATRIX_ALICE, 'book me a plan', { relatesTo: inThread });
    const poll = await matrix.waitUntil(() => matrix.polls(room)[0], 15_000, 'the poll');
    const start = matrix.sent.find((e) => e.event_id === poll.eventId)!;
    expect(start.content['m.relates_to']).toMatchObject({ rel_type: 'm.thread', event_id: root.event_id });
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[0]!.id]);
    await matrix.waitUntil(() => matrix.texts(room).includes('Basic, then.'), 15_000, 'the answer');
    expect(toolResult(2)).toMatchObject({ answer: 'Basic', option: 1 }); // request 0 answered the root
    await h.idle(15_000, thread);
    expect(matrix.polls(room)[0]!.ended).toContain('Basic (chosen by');
    expect((await h.entries('message.received', CONVERSATION())).map((e) => e.text)).toEqual(['plans thread']);
  });

  it('a poll the room refuses (403) leaves the question as text and the send a success; a poll refused with a 5xx fails the send, to be retried under the same keys', async () => {
    const buttons = [
      { label: 'Basic', command: '/choose qu_000000000000000000000000 1' },
      { label: 'Pro', command: '/choose qu_000000000000000000000000 2' },
    ];
    matrix.failNext('send', { status: 403, errcode: 'M_FORBIDDEN', eventType: 'org.matrix.msc3381.poll.start' });
    const sent = await plugin.outbound.send(CONVERSATION(), 'Which plan?', { buttons, deliveryKey: 'run1:1:0' });
    expect(sent.messageId).toMatch(/^\$/);
    expect(matrix.texts(room)).toEqual(['Which plan?']);
    expect(matrix.polls(room)).toEqual([]);

    matrix.failNext('send', { status: 502, eventType: 'org.matrix.msc3381.poll.start' });
    await expect(plugin.outbound.send(CONVERSATION(), 'Which size?', { buttons, deliveryKey: 'run2:1:0' })).rejects.toMatchObject({ status: 502 });
    // The retry: the text's send is deduplicated by its transaction id, the poll goes out once.
    await plugin.outbound.send(CONVERSATION(), 'Which size?', { buttons, deliveryKey: 'run2:1:0' });
    expect(matrix.texts(room)).toEqual(['Which plan?', 'Which size?']);
    expect(matrix.polls(room).map((p) => p.answers.map((a) => a.label))).toEqual([['Basic', 'Pro']]);
  });

  it('ignores, writing nothing, a response to an unknown poll or answer, an edited one, the bot’s own, one from another room, and any after the choice', async () => {
    const poll = await askPlan('Pro it is.');
    await handled();
    const before = await written();
    const other = matrix.createRoom([MATRIX_TEST.userId, MATRIX_BOB]);
    const pro = poll.answers[1]!.id;
    matrix.pollResponse(room, MATRIX_ALICE, '$not-a-poll-of-the-bot', [pro]);
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, ['sb-forgedanswerid0']);
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [], {});
    // Edits: a replacement naming the poll, and a reference carrying new content.
    const newContent = { 'm.new_content': { 'org.matrix.msc3381.poll.response': { answers: [pro] } } };
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [pro], { relatesTo: { rel_type: 'm.replace', event_id: poll.eventId } });
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [pro], { content: newContent });
    matrix.pollResponse(room, MATRIX_TEST.userId, poll.eventId, [pro]);
    matrix.pollResponse(other, MATRIX_BOB, poll.eventId, [pro]);
    await handled();
    expect(await written()).toEqual(before);
    expect(matrix.polls(room)[0]!.ended).toBeUndefined();

    // The poll still takes the asker's choice (stable `m.poll.response` form too), once.
    const choice = matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [pro], { type: 'm.poll.response' });
    expect(await nthText(2, 'the answer')).toBe('Pro it is.');
    expect(toolResult(1)).toMatchObject({ answer: 'Pro', option: 2 });
    await h.idle(15_000, CONVERSATION());
    await handled();
    const after = await written();
    matrix.redeliver(room, choice);
    matrix.pollResponse(room, MATRIX_ALICE, poll.eventId, [poll.answers[0]!.id]);
    await handled();
    expect(await written()).toEqual(after);
    expect(matrix.texts(room)).toEqual([expect.stringContaining('Which plan?'), 'Pro it is.']);
    expect(ai.requests).toHaveLength(2);
  });
});
