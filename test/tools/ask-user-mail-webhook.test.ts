/**
 * `ask_user` end to end on email and the webhook channel, each with its real
 * client side (real mail servers and IMAP/SMTP clients, signed HTTP), the
 * channel host, Redis, BullMQ and a runner with the local agent (real
 * OpenAI-compatible provider, fake model), in one
 * conversation per channel (ask-user-flow.ts): the model asks which plan,
 * option 2 is picked, the model answers; then it asks when to start, the
 * person writes an answer of their own, which joins the run as the answer.
 *
 * - Email: no buttons (the question is its numbered text). Picking option 2
 *   is a reply mail saying "2", which is not a click: the tool result is
 *   `answer: null` and the model gets "2" as the person's message, as with
 *   any written answer.
 * - Webhook: the question's callback carries one action per option
 *   (`{ label, command: "/choose <id> <n>" }`); a click is the client's own
 *   signed message carrying the action's command, and "Chosen: …" comes
 *   back as a callback of its own.
 *
 * The web chat's test drives a browser: ask-user-web.test.ts (the e2e lane).
 */
import { describe, expect, it } from 'vitest';
import { createHttpServer, listen } from '../../host/http.js';
import { idPart } from '../../plugins/email/normalize.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { startMailServers } from '../../testing/fakes/mail-servers.js';
import { startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { mailToBot, startEmailSystem, untilReplies } from '../channels/email-harness.js';
import { hostChannel, runnerFor } from '../channels/system.js';
import { RunnerHarness } from '../runner/harness.js';
import * as flow from './ask-user-flow.js';

const w = flow.askUserWorld({ harness: false });

/** A runner harness closed after the test. */
async function harness(): Promise<RunnerHarness> {
  const h = await RunnerHarness.start();
  w.closers.push(() => h.close());
  return h;
}

describe('ask_user on email and webhooks', () => {
  it('email: the question as numbered text; a reply saying "2" reaches the model as the person’s message, and so does a written answer', async () => {
    const servers = await startMailServers();
    w.closers.push(() => servers.stop());
    const h = await harness();
    const { http, plugin } = await startEmailSystem({ h, servers, agent: w.agent() });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    const root = await mailToBot(servers, { subject: 'Plans', text: 'book me a plan' });
    const conversation = `email:${idPart(root)}`;
    /** Alice answers the bot's latest mail in the thread. */
    const reply = async (text: string) => {
      const replies = await untilReplies(servers, root, 1);
      const last = replies.at(-1)!;
      await mailToBot(servers, { subject: 'Re: Plans', text, inReplyTo: last.messageId!, references: [root, last.messageId!] });
    };
    const texts = async (count: number, what: string) => (await untilReplies(servers, root, count, what)).map((m) => m.text?.trim());

    expect((await texts(1, 'the first question'))[0]).toBe(flow.questionText(flow.PLAN));
    await reply('2');
    expect((await texts(2, 'the first answer'))[1]).toBe(flow.BOOKED);
    flow.expectTypedAnswer(w.ai, 1, '2');
    expect(w.ai.requests[1]!.body.messages.at(-1).content).toBe('2');
    await h.idle(15_000, conversation);

    await reply('when does it start?');
    expect((await texts(3, 'the second question'))[2]).toBe(flow.questionText(flow.START));
    await reply(flow.TYPED);
    expect((await texts(4, 'the final answer'))[3]).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await h.idle(15_000, conversation);
    expect(await texts(4, 'the replies')).toHaveLength(4);
    expect(w.ai.requests).toHaveLength(4);
  });

  it('webhook: one action per option in the callback; the client’s signed message with action 2’s command is the answer; a message written instead is the next answer', async () => {
    const SECRET = 'whsec-ask-0123456789abcdef';
    const CHAT = 'ticket-ask';
    const callbacks = await startCallbackServer(SECRET);
    w.closers.push(() => callbacks.close());
    const h = await harness();
    const plugin = createWebhookPlugin(
      'ask',
      { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 },
      { logger: h.ctx.logger, redis: h.ctx.redis, prefix: h.prefix },
    );
    const http = createHttpServer({ config: h.ctx.config, redis: h.ctx.redis, logger: h.ctx.logger });
    await hostChannel(h, http, plugin);
    const url = await listen(http, { host: '127.0.0.1', port: 0 });
    w.closers.push(
      () => http.close(),
      () => plugin.stop(),
    );
    await runnerFor(h, w.agent(), plugin);
    let n = 0;
    const say = async (text: string) => {
      const body = JSON.stringify({ id: `m${++n}`, conversation: CHAT, sender: { id: 'ann', name: 'Ann' }, text });
      const res = await fetch(`${url}/webhooks/ask`, { method: 'POST', headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, body) }, body });
      expect(res.status).toBe(202);
    };
    const nth = async (k: number) => (await callbacks.waitForAccepted(k, 15_000))[k - 1]!.body;
    const conversation = `webhook:ask:${CHAT}`;

    await say('book me a plan');
    const q = await nth(1);
    expect(q.text).toBe(flow.questionText(flow.PLAN));
    const id = flow.questionIdIn(q.actions?.[0]?.command ?? '');
    expect(q.actions).toEqual(flow.PLAN.options.map((label, i) => ({ label, command: flow.chooseCommands(id, flow.PLAN)[i] })));

    await say(q.actions![1]!.command);
    await callbacks.waitForAccepted(3, 15_000);
    flow.expectChosenAndBooked(callbacks.texts(CHAT).slice(1));
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: 'Ann' });
    await h.idle(15_000, conversation);

    await say('when does it start?');
    expect((await nth(4)).actions?.map((a) => a.label)).toEqual(flow.START.options);
    await say(flow.TYPED);
    expect((await nth(5)).text).toBe(flow.STARTS);
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    await h.idle(15_000, conversation);
    expect(callbacks.accepted()).toHaveLength(5);
    expect(w.ai.requests).toHaveLength(4);
  });
});
