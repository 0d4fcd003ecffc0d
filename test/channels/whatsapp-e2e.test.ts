/**
 * End to end through the whole system: signed deliveries from the fake
 * WhatsApp Cloud API → the real plugin's webhook → the real channel host →
 * Redis → BullMQ → the runner with the local agent (real OpenAI-compatible
 * provider, fake model) → delivery → the plugin's outbound → the fake Graph API.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConsoleReads } from '../../host/console/reads.js';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolboxOptions } from '../../plugins/local-agent/toolbox.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { RunQueue } from '../../src/protocol/run-queue.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WA_ALICE, wamid } from '../../testing/fakes/whatsapp-server.js';
import { PNG } from '../helpers/media.js';
import { fakeModel, gatedTool, RunnerHarness, refundTool } from '../runner/harness.js';
import { startWhatsAppSystem } from './whatsapp-harness.js';

const CONVERSATION = `whatsapp:${WA_ALICE.waId}`;

let ai: FakeOpenAIServer;
let wa: FakeWhatsApp;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let deliver: (payload: unknown) => Promise<number>;
let url: string;
let lookup: ReturnType<typeof gatedTool>;
let refunds: number[];

async function boot(toolbox?: ToolboxOptions): Promise<void> {
  h = await RunnerHarness.start();
  ({ http, plugin, deliver, url } = await startWhatsAppSystem({
    h,
    wa,
    agent: createLocalAgentPlugin({
      model: fakeModel(ai.url),
      tools: [lookup.tool, refundTool((n) => refunds.push(n))],
      builtins: { currentTime: false },
      ...(toolbox && { toolbox }),
    }),
  }));
}

beforeEach(async () => {
  ai = await startFakeOpenAI();
  wa = await startFakeWhatsApp();
  lookup = gatedTool();
  refunds = [];
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await wa.close();
  await ai.close();
});

const say = async (text: string, id = wamid()) => expect(await deliver(messageDelivery({ id, text }))).toBe(200);
const texts = () => wa.sent.map((m) => m.text);
const nth = async (n: number, what: string) => (await wa.waitUntil(() => wa.sent.length >= n && wa.sent, 15_000, what))[n - 1]!;
const userTexts = (i: number): unknown[] =>
  ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);

describe('whatsapp end to end', () => {
  beforeEach(() => boot());

  it('answers a message in its chat, marking it read with the typing indicator while the agent works', async () => {
    ai.script([{ text: 'Hello **Alice**, how can I help?' }]);
    const id = wamid();
    await say('hi there', id);
    const reply = await nth(1, 'the reply');
    expect(reply).toMatchObject({ to: WA_ALICE.waId, type: 'text', text: 'Hello *Alice*, how can I help?' });
    expect(wa.reads).toContainEqual({ messageId: id, typing: true });
  });

  // The heading's old pattern split the run of spaces every way from every start: about 20 s of the one thread for
  // this line; the timeout is what fails when the thread is held.
  it('renders a reply repeating a stranger’s crafted heading (4 096 characters, nearly all spaces) as one bold line, at once', {
    timeout: 10_000,
  }, async () => {
    const crafted = `# a${' '.repeat(4092)}b`;
    ai.script([{ text: crafted }]);
    await say(crafted);
    expect(await nth(1, 'the reply')).toMatchObject({ type: 'text', text: `*a${' '.repeat(4092)}b*` });
  });

  it('takes a tap on a button as its id and as a click, never its title: a title reading /purge or /pair is not typed by the one who taps', async () => {
    ai.script([{ text: 'Noted.' }]);
    // A button sent with the command `ok` under the title `/purge stop` (the title is what WhatsApp shows and echoes back).
    expect(await deliver(messageDelivery({ buttonReply: { id: 'ok', title: '/purge stop' } }))).toBe(200);
    await nth(1, 'the answer');
    await h.idle(15_000, CONVERSATION);
    expect(await h.entries('message.received', CONVERSATION)).toMatchObject([{ text: 'ok' }]);
    expect(userTexts(0)).toEqual(['ok']);
    // A typed-only command a tap would carry is refused as a click.
    expect(await deliver(messageDelivery({ buttonReply: { id: '/pair ABCD-EFGH', title: 'Done' } }))).toBe(200);
    expect((await nth(2, 'the refusal')).text).toMatch(/\/pair/);
    expect(await h.entries('message.received', CONVERSATION)).toHaveLength(1);
  });

  it('ignores a message sent in a group (a group_id): its conversations are one-to-one', async () => {
    expect(await deliver(messageDelivery({ text: 'hi from the group', groupId: '120363040000000001' }))).toBe(200);
    await say('hi from my chat');
    await nth(1, 'the answer to the chat');
    expect((await h.entries('message.received', CONVERSATION)).map((e) => e.text)).toEqual(['hi from my chat']);
  });

  it('gives one reply to a message delivered three times', async () => {
    ai.script([{ text: 'Only once.' }]);
    const payload = messageDelivery({ text: 'are you there?' });
    expect(await Promise.all([deliver(payload), deliver(payload), deliver(payload)])).toEqual([200, 200, 200]);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    expect(texts()).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', CONVERSATION)).toHaveLength(1);
  });

  it('steers a message sent while the agent runs a tool into the same run, and the reply answers it', async () => {
    ai.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Here is the schedule, weekend included.' }] satisfies FakeTurn[]);
    await say('look up the schedule');
    await lookup.started;
    await say('also the weekend please');
    const [steered] = await h.entries('steering.queued', CONVERSATION);
    expect(steered).toBeDefined();
    lookup.release('SCHEDULE');

    await h.idle(15_000, CONVERSATION);
    expect(userTexts(1)).toEqual(['look up the schedule', 'also the weekend please']);
    expect(texts()).toEqual(['Here is the schedule, weekend included.']);
    expect((await h.entries('run.started', CONVERSATION)).map((e) => e.run)).toEqual([steered!.run]);
  });

  it('honours a rate limit: the reply is sent again after Retry-After, once', async () => {
    ai.script([{ text: 'After the wait.' }]);
    wa.failNext('send', { status: 429, code: 130429, message: 'Rate limit hit', retryAfterSeconds: 1 });
    await say('hello');
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    expect(wa.calls.filter((c) => c.kind === 'send').map((c) => c.status)).toEqual([429, 200]);
    expect(texts()).toEqual(['After the wait.']);
  });

  it('records a reply refused because the 24-hour window closed, without retrying it, and the console lists it', async () => {
    ai.script([{ text: 'Too late for this one.' }]);
    wa.failNext('send', { status: 400, code: 131047, message: 'Re-engagement message' });
    await say('hello');
    await wa.waitUntil(() => wa.calls.some((c) => c.kind === 'send'), 15_000, 'the refused send');
    await h.idle(15_000, CONVERSATION);
    expect(wa.calls.filter((c) => c.kind === 'send')).toHaveLength(1);
    expect(wa.sent).toEqual([]);
    const problem = '1 reply not delivered (last: 24-hour window closed (the user must write first, or send a template))';
    expect(await plugin.conversationProblems!(CONVERSATION)).toEqual([problem]);
    // The console's conversation row lists it as why the conversation is stuck.
    const reads = new ConsoleReads({ redis: h.redis, prefix: h.prefix, dispatch: h.dispatch, queue: {} as RunQueue, channels: [plugin] });
    expect((await reads.row(CONVERSATION, Date.now())).stuck).toContain(problem);

    // /status names it too (its own reply goes out: the user wrote, so the window is open again).
    await say('/status');
    expect((await nth(1, 'the /status reply')).text).toContain(`Problem: ${problem}`);
  });

  it('refuses a delivery with a bad signature (401) or a malformed body (400): no turn, nothing recorded', async () => {
    expect((await postDelivery(url, messageDelivery({ text: 'forged' }), 'not-the-app-secret-000000')).status).toBe(401);
    const malformed = await postDelivery(url, { object: 'whatsapp_business_account', entry: [{ changes: 'nope' }] });
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatch(/^bad delivery: entry\.0\.changes/);
    expect(await h.redis.keys(`${h.prefix}:{c:*`)).toEqual([]);
    expect(ai.requests).toEqual([]);
  });

  it('fetches an image through the Graph media endpoint and gives it to the model', async () => {
    const bytes = PNG;
    wa.addMedia('media-77', bytes, 'image/png');
    ai.script([{ text: 'A nice picture.' }]);
    expect(await deliver(messageDelivery({ media: { type: 'image', id: 'media-77', mimeType: 'image/png', caption: 'what is this?' } }))).toBe(200);
    await nth(1, 'the reply');
    expect(wa.calls.filter((c) => c.kind === 'media' || c.kind === 'download').map((c) => [c.kind, c.status])).toEqual([
      ['media', 200],
      ['download', 200],
    ]);
    const user = JSON.stringify(ai.requests[0]!.body.messages.filter((m: { role: string }) => m.role === 'user'));
    expect(user).toContain('what is this?');
    expect(user).toContain(bytes.toString('base64'));
  });
});

describe('approval over WhatsApp', () => {
  beforeEach(() => boot({ policy: { tools: { refund: 'require_approval' } } }));

  it('shows Approve / Deny reply buttons; a click runs the tool once and the answer arrives', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 40 } }] }, { text: 'Refunded 40.' }]);
    await say('refund 40');
    const request = await nth(1, 'the approval request');
    const id = /\/approve (ap_[0-9a-f]{24})/.exec(request.text)?.[1];
    expect(request.type).toBe('interactive');
    expect(request.buttons).toEqual([
      { id: `/approve ${id}`, title: 'Approve' },
      { id: `/deny ${id}`, title: 'Deny' },
    ]);

    const click = messageDelivery({ buttonReply: { id: `/approve ${id}`, title: 'Approve' } });
    expect(await deliver(click)).toBe(200);
    expect(await deliver(click)).toBe(200);
    expect((await nth(2, 'the decision')).text).toBe('Approved: refund will run.');
    expect((await nth(3, 'the answer')).text).toBe('Refunded 40.');
    await h.idle(15_000, CONVERSATION);
    expect(refunds).toEqual([40]);
    expect(texts()).toHaveLength(3);
  });
});
