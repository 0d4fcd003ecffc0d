/**
 * End to end through the whole system over Socket Mode: the fake Slack
 * pushes envelopes over its WebSocket to the real `@slack/socket-mode`
 * client → the real channel host → Redis → BullMQ → the runner with the
 * local agent (real OpenAI-compatible provider, fake model) → delivery →
 * the plugin's outbound (`@slack/web-api`) → the fake Slack's Web API.
 * Approvals are clicked both over the socket and at the interactivity route.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolboxOptions } from '../../plugins/local-agent/toolbox.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { blockActions, eventCallback, type FakeSlack, SLACK_BOT_USER, type SlackPostedMessage, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { fakeModel, gatedTool, RunnerHarness, refundTool, waitFor } from '../runner/harness.js';
import { postClick, postEvent, startSlackSystem } from './slack-harness.js';

const DM = 'D0000DM1';
const CHAN = 'C0000CH1';
const ANN = 'U0000ANN';
const BOB = 'U0000BOB';
const DM_CONVERSATION = `slack:${DM}`;

let ai: FakeOpenAIServer;
let slack: FakeSlack;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let lookup: ReturnType<typeof gatedTool>;
let refunds: number[];
let n = 0;

const refund = refundTool((amount) => refunds.push(amount));

async function boot(opts: { toolbox?: ToolboxOptions; config?: Parameters<typeof startSlackSystem>[0]['config'] } = {}): Promise<void> {
  h = await RunnerHarness.start();
  ({ http, plugin } = await startSlackSystem({
    h,
    slack,
    agent: createLocalAgentPlugin({
      model: fakeModel(ai.url),
      tools: [lookup.tool, refund],
      builtins: { currentTime: false },
      ...(opts.toolbox && { toolbox: opts.toolbox }),
    }),
    ...(opts.config && { config: opts.config }),
  }));
}

beforeEach(async () => {
  ai = await startFakeOpenAI();
  slack = await startFakeSlack();
  lookup = gatedTool();
  refunds = [];
});

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  await h?.close();
  await slack.close();
  await ai.close();
});

/** A fresh message ts. */
const ts = () => `${1_800_000_000 + ++n}.000100`;
/** Ann writes in the DM over the socket; returns the envelope id. */
const say = (text: string, at = ts(), retry = 0) => slack.deliver('events_api', eventCallback({ channel: DM, ts: at, user: ANN, text }), retry);
/** Waits for the bot's n-th message (1-based) in the DM. */
const nth = (k: number, what: string) => waitFor(() => slack.messages.filter((m) => m.channel === DM)[k - 1], 15_000, what) as Promise<SlackPostedMessage>;
const approvalIdIn = (text: string) => /\/approve (ap_[0-9a-f]{24})/.exec(text)?.[1] ?? '';

describe('slack end to end (socket mode)', () => {
  it('answers a DM in the DM and acknowledges the envelope', async () => {
    await boot();
    ai.script([{ text: 'Hello **Ann**, how can I help?' }]);
    const envelope = say('hi there');
    const reply = await nth(1, 'a reply');
    expect(reply).toMatchObject({ channel: DM, threadTs: undefined, text: 'Hello *Ann*, how can I help?' });
    expect(slack.acks).toContain(envelope);
    expect(JSON.stringify(ai.requests[0]!.body.messages)).toContain('hi there');
  });

  it('answers a mention in a channel once, in the thread it starts, though it arrives as app_mention and as message', async () => {
    await boot();
    ai.script([{ text: 'In the thread.' }]);
    const at = ts();
    const text = `<@${SLACK_BOT_USER}> where?`;
    slack.deliver('events_api', eventCallback({ type: 'app_mention', channel: CHAN, ts: at, user: ANN, text }));
    slack.deliver('events_api', eventCallback({ channel: CHAN, channelType: 'channel', ts: at, user: ANN, text }));
    const reply = await waitFor(() => slack.messages.find((m) => m.channel === CHAN), 15_000, 'a reply in the channel');
    expect(reply).toMatchObject({ threadTs: at, text: 'In the thread.' });
    await h.idle(15_000, `slack:${CHAN}:${at}`);
    expect(await h.entries('message.received', `slack:${CHAN}:${at}`)).toHaveLength(1);
    expect(slack.textsIn(CHAN)).toEqual(['In the thread.']);
    expect(ai.requests).toHaveLength(1);
  });

  it('gives one reply to a message delivered again (a retried envelope)', async () => {
    await boot();
    ai.script([{ text: 'Only once.' }]);
    const at = ts();
    const first = say('are you there?', at);
    const again = say('are you there?', at, 1);
    await nth(1, 'a reply');
    await h.idle(15_000, DM_CONVERSATION);
    await waitFor(() => slack.acks.includes(first) && slack.acks.includes(again), 15_000, 'both acks');
    expect(slack.textsIn(DM)).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', DM_CONVERSATION)).toHaveLength(1);
  });

  it('steers a message sent while the agent runs a tool into the same run', async () => {
    await boot();
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Schedule, weekend included.' }] satisfies FakeTurn[]);
    say('look up the schedule');
    await lookup.started;
    say('also the weekend please');
    const [steered] = await waitFor(
      async () => {
        const e = await h.entries('steering.queued', DM_CONVERSATION);
        return e.length > 0 && e;
      },
      15_000,
      'steering.queued',
    );
    lookup.release('SCHEDULE');
    await h.idle(15_000, DM_CONVERSATION);
    expect(ai.requests).toHaveLength(2);
    const users = ai.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);
    expect(users).toEqual(['look up the schedule', 'also the weekend please']);
    expect(slack.textsIn(DM)).toEqual(['Schedule, weekend included.']);
    expect((await h.entries('run.started', DM_CONVERSATION)).map((e) => e.run)).toEqual([steered!.run]);
  });

  it('waits out a 429 and its Retry-After, then sends the reply once', async () => {
    await boot({ config: { streaming: false } });
    slack.failNext('chat.postMessage', { status: 429, retryAfter: 1 });
    ai.script([{ text: 'After the limit.' }]);
    say('hello');
    await nth(1, 'the reply');
    await h.idle(15_000, DM_CONVERSATION);
    expect(slack.callsOf('chat.postMessage').map((c) => c.outcome)).toEqual([429, 'ok']);
    expect(slack.textsIn(DM)).toEqual(['After the limit.']);
  });
});

describe('slack approvals', () => {
  const policy: ToolboxOptions = { policy: { tools: { refund: 'require_approval' } } };

  it('shows Approve / Deny buttons; a click over the socket runs the tool once, edits the message, and a second click changes nothing', async () => {
    await boot({ toolbox: policy });
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 40 } }] }, { text: 'Refunded 40.' }]);
    say('refund 40');
    const request = await nth(1, 'the approval request');
    const id = approvalIdIn(request.text);
    const actions = request.blocks?.find((b) => b.type === 'actions');
    expect(actions.elements.map((e: { text: { text: string }; value: string }) => [e.text.text, e.value])).toEqual([
      ['Approve', `/approve ${id}`],
      ['Deny', `/deny ${id}`],
    ]);

    slack.deliver('interactive', blockActions(request, `/approve ${id}`, ANN, '1800000100.000001'));
    expect((await nth(2, 'the answer')).text).toBe('Refunded 40.');
    expect(refunds).toEqual([40]);
    expect(slack.ephemerals[0]).toMatchObject({ channel: DM, user: ANN, text: 'Approved: refund will run.' });
    expect(request.text).toContain('Approved by');
    expect(request.blocks?.some((b) => b.type === 'actions')).toBe(false);

    await h.idle(15_000, DM_CONVERSATION);
    slack.deliver('interactive', blockActions(request, `/deny ${id}`, ANN, '1800000100.000002'));
    await waitFor(() => slack.ephemerals.length >= 2, 15_000, 'the second answer');
    expect(slack.ephemerals[1]!.text).toMatch(/^Already decided: approved by .*Nothing changed\.$/);
    expect(refunds).toEqual([40]);
    expect(slack.textsIn(DM)).toHaveLength(2);
  });

  it('takes a click at the signed interactivity route (Events API mode), once even when the click arrives twice', async () => {
    await boot({ toolbox: policy, config: { mode: 'events' } });
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 7 } }] }, { text: 'Refunded 7.' }]);
    const body = eventCallback({ channel: DM, ts: ts(), user: ANN, text: 'refund 7' });
    expect((await postEvent(http, body)).status).toBe(200);
    const request = await nth(1, 'the approval request');
    const click = blockActions(request, `/approve ${approvalIdIn(request.text)}`, ANN, '1800000200.000001');
    expect((await postClick(http, click, { 'x-slack-signature': 'v0=00', 'x-slack-request-timestamp': String(Math.floor(Date.now() / 1000)) })).status).toBe(
      401,
    );
    const answers = await Promise.all([postClick(http, click), postClick(http, click)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect((await nth(2, 'the answer')).text).toBe('Refunded 7.');
    expect(refunds).toEqual([7]);
    expect(slack.ephemerals.filter((e) => e.text === 'Approved: refund will run.')).toHaveLength(1);
  });

  it('someone not allowed to decide is told so, and the buttons stay', async () => {
    await boot({ toolbox: { policy: { tools: { refund: 'require_approval' }, approvalTimeoutMs: 1500 } } });
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 5 } }] }, { text: 'Nobody approved it.' }]);
    say('refund 5');
    const request = await nth(1, 'the approval request');
    slack.deliver('interactive', blockActions(request, `/approve ${approvalIdIn(request.text)}`, BOB, '1800000300.000001'));
    await waitFor(() => slack.ephemerals.length >= 1, 15_000, 'the refusal');
    expect(slack.ephemerals[0]).toMatchObject({ user: BOB, text: 'You are not allowed to decide this request. Nothing changed.' });
    expect(request.blocks?.some((b) => b.type === 'actions')).toBe(true);
    expect((await nth(2, 'the answer')).text).toBe('Nobody approved it.');
    expect(refunds).toEqual([]);
  });
});
