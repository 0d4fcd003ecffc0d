/**
 * `ask_user` end to end on the messengers, each through the real plugin
 * against its fake, the channel host, Redis, BullMQ and a runner with the
 * local agent (real OpenAI-compatible provider, fake model), in one
 * conversation per channel (ask-user-flow.ts): the model asks which plan,
 * option 2 is picked, the model answers; then it asks when to start, the
 * person writes an answer of their own, which joins the run as the answer.
 *
 * - WhatsApp: an interactive message with one reply button per option (up
 *   to three) carrying `/choose <id> <n>`; a tap comes back as an
 *   interactive `button_reply` message from the person, and "Chosen: …" is
 *   a text message of its own (WhatsApp cannot edit a message).
 * - LINE: quick replies under the question; a tap sends the quick reply's
 *   text, `/choose <id> <n>`, as the person's own text message (LINE's click
 *   path), and "Chosen: …" is a text message of its own.
 * - Matrix: the question is its numbered text, then a poll (a response to
 *   the poll is the click: ask-user-matrix.test.ts). Here option 2 is typed,
 *   "2", which is not a click: the tool result is `answer: null` and the
 *   model gets "2" as the person's message, as with any written answer.
 */
import { describe, expect, it } from 'vitest';
import { LINE_ALICE, lineDelivery, lineTextEvent, startFakeLine } from '../../testing/fakes/line-server.js';
import { MATRIX_ALICE, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { messageDelivery, startFakeWhatsApp, WA_ALICE } from '../../testing/fakes/whatsapp-server.js';
import { startLineSystem } from '../channels/line-harness.js';
import { startMatrixSystem, untilSyncing } from '../channels/matrix-harness.js';
import { startWhatsAppSystem } from '../channels/whatsapp-harness.js';
import * as flow from './ask-user-flow.js';

const w = flow.askUserWorld({ harness: true });

describe('ask_user on the messengers', () => {
  it('WhatsApp: reply buttons; the tap on option 2 is the answer; a message written instead is the next answer', async () => {
    const wa = await startFakeWhatsApp();
    w.closers.push(() => wa.close());
    const { http, plugin, deliver } = await startWhatsAppSystem({ h: w.h, wa, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    const conversation = `whatsapp:${WA_ALICE.waId}`;
    const say = async (text: string) => expect(await deliver(messageDelivery({ text }))).toBe(200);
    const nth = async (k: number, what: string) => (await wa.waitUntil(() => wa.sent.length >= k && wa.sent, 15_000, what))[k - 1]!;

    await say('book me a plan');
    const q = await nth(1, 'the first question');
    const id = flow.questionIdIn(q.buttons?.[0]?.id ?? '');
    expect(q).toMatchObject({ to: WA_ALICE.waId, type: 'interactive', text: flow.questionText(flow.PLAN) });
    expect(q.buttons).toEqual(flow.PLAN.options.map((title, i) => ({ id: flow.chooseCommands(id, flow.PLAN)[i], title })));

    expect(await deliver(messageDelivery({ buttonReply: q.buttons![1]! }))).toBe(200);
    await wa.waitUntil(() => wa.sent.some((m) => m.text === flow.BOOKED), 15_000, 'the first answer');
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: WA_ALICE.name });
    await w.h.idle(15_000, conversation);
    flow.expectChosenAndBooked(wa.sent.slice(1).map((m) => m.text));

    await say('when does it start?');
    const q2 = await nth(4, 'the second question');
    expect(q2.buttons?.map((b) => b.title)).toEqual(flow.START.options);
    await say(flow.TYPED);
    expect((await nth(5, 'the final answer')).text).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, conversation);
    expect(wa.sent).toHaveLength(5);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('LINE: quick replies; the tap on option 2 is the answer; a message written instead is the next answer', async () => {
    const line = await startFakeLine();
    w.closers.push(() => line.close());
    const { http, plugin, deliver } = await startLineSystem({ h: w.h, line, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    const conversation = `line:${LINE_ALICE}`;
    const say = async (text: string) => expect(await deliver(lineDelivery(lineTextEvent({ text, replyToken: line.issueReplyToken(LINE_ALICE) })))).toBe(200);
    const nth = async (k: number, what: string) => (await line.waitUntil(() => line.sent.length >= k && line.sent, 15_000, what))[k - 1]!;

    await say('book me a plan');
    const q = await nth(1, 'the first question');
    const id = flow.questionIdIn(q.quickReplies?.[0]?.text ?? '');
    expect(q).toMatchObject({ to: LINE_ALICE, text: flow.questionText(flow.PLAN) });
    expect(q.quickReplies).toEqual(flow.PLAN.options.map((label, i) => ({ label, text: flow.chooseCommands(id, flow.PLAN)[i] })));

    // A tap on a quick reply is the person's own text message with the reply's text.
    await say(q.quickReplies![1]!.text);
    await line.waitUntil(() => line.sent.some((m) => m.text === flow.BOOKED), 15_000, 'the first answer');
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: LINE_ALICE });
    await w.h.idle(15_000, conversation);
    flow.expectChosenAndBooked(line.sent.slice(1).map((m) => m.text));

    await say('when does it start?');
    const q2 = await nth(4, 'the second question');
    expect(q2.quickReplies?.map((r) => r.label)).toEqual(flow.START.options);
    await say(flow.TYPED);
    expect((await nth(5, 'the final answer')).text).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, conversation);
    expect(line.sent).toHaveLength(5);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('Matrix: the question as numbered text with a poll; typing "2" while the poll is open reaches the model as the person’s message, and so does a written answer', async () => {
    const matrix = await startFakeMatrix();
    w.closers.push(() => matrix.close());
    const room = matrix.directRoom(MATRIX_ALICE);
    const { http, plugin } = await startMatrixSystem({ h: w.h, matrix, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    await untilSyncing(matrix);
    const conversation = `matrix:${room}`;
    const say = (text: string) => matrix.message(room, MATRIX_ALICE, text);
    const nth = async (k: number, what: string) => (await matrix.waitUntil(() => matrix.texts(room).length >= k && matrix.texts(room), 15_000, what))[k - 1]!;

    say('book me a plan');
    expect(await nth(1, 'the first question')).toBe(flow.questionText(flow.PLAN));
    // The poll follows the question's text.
    const polls = await matrix.waitUntil(() => matrix.polls(room).length > 0 && matrix.polls(room), 15_000, 'the poll');
    expect(polls.map((p) => p.answers.map((a) => a.label))).toEqual([flow.PLAN.options]);
    // The poll's answers carry ids made from the commands, never the commands themselves.
    expect(JSON.stringify(matrix.sent)).not.toContain('/choose');
    say('2');
    expect(await nth(2, 'the first answer')).toBe(flow.BOOKED);
    flow.expectTypedAnswer(w.ai, 1, '2');
    expect(w.ai.requests[1]!.body.messages.at(-1).content).toBe('2');
    await w.h.idle(15_000, conversation);

    say('when does it start?');
    expect(await nth(3, 'the second question')).toBe(flow.questionText(flow.START));
    say(flow.TYPED);
    expect(await nth(4, 'the final answer')).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await w.h.idle(15_000, conversation);
    expect(matrix.texts(room)).toHaveLength(4);
    expect(w.ai.requests).toHaveLength(4);
  });
});
