/**
 * End to end through the whole system: activities with Bot Service tokens →
 * the real Teams plugin's messaging endpoint (the token checked against the
 * fake's published keys) → the real channel host → Redis → BullMQ →
 * the runner with the local agent (real OpenAI-compatible provider, fake
 * model) → delivery → the plugin's outbound → the SDK's connector client →
 * the fake Bot Connector.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTeams, startFakeTeams, TEAMS_BOB, type TeamsActivityOptions, type TeamsSentActivity } from '../../testing/fakes/teams-server.js';
import { fakeModel, gatedTool, RunnerHarness, refundTool, waitFor } from '../runner/harness.js';
import { botServiceToken, postActivity, startTeamsSystem } from './teams-harness.js';

const CHAT = 'a:1alice-personal-chat';
const CONVERSATION = `teams:${CHAT}`;

let ai: FakeOpenAIServer;
let teams: FakeTeams;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let url: string;
let deliver: (activity: Record<string, unknown>) => Promise<number>;
let lookup: ReturnType<typeof gatedTool>;
let refunds: number[];

beforeEach(async () => {
  ai = await startFakeOpenAI();
  teams = await startFakeTeams();
  lookup = gatedTool();
  refunds = [];
  h = await RunnerHarness.start();
  ({ http, plugin, url, deliver } = await startTeamsSystem({
    h,
    teams,
    agent: createLocalAgentPlugin({
      model: fakeModel(ai.url),
      tools: [lookup.tool, refundTool((amount) => refunds.push(amount))],
      builtins: { currentTime: false, askUser: true },
      toolbox: { policy: { tools: { refund: 'require_approval' } } },
    }),
  }));
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await teams.close();
  await ai.close();
});

/** A message from Alice in her personal chat with the bot. */
const fromAlice = (text: string, over: TeamsActivityOptions = {}) => teams.message({ conversationId: CHAT, text, ...over });
const texts = () => teams.texts(CHAT);
const nth = async (n: number, what: string) => (await teams.waitUntil(() => texts().length >= n && texts(), 15_000, what))[n - 1]!;
const conversationKeys = () => h.redis.keys(`${h.prefix}:*{c:*`);
/** Clicks the button of `card` whose command starts with `prefix`, as `from` (default Alice): Teams posts the `Action.Submit` data as `value`. */
const click = (card: TeamsSentActivity, prefix: string, from?: { id: string; name: string }) => {
  const button = card.buttons.find((b) => (b.data as { steerbot: string }).steerbot.startsWith(prefix));
  if (!button) throw new Error(`no ${prefix} button`);
  return deliver(teams.message({ conversationId: CHAT, value: button.data, replyToId: card.id, ...(from && { from }) }));
};
const card = (n: number) => teams.sent.filter((s) => s.type === 'message')[n - 1]!;
const userTextsOf = (marker: string): unknown[][] =>
  ai.requests
    .filter((r) => JSON.stringify(r.body.messages).includes(marker))
    .map((r) => r.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content));

describe('teams end to end', () => {
  it('answers a message in the conversation, typing while the agent works', async () => {
    // The model takes a second: typing shows once a run has worked half a second.
    ai.script([{ text: 'Hello Alice, how can I help?', delayMs: 1000 }]);
    expect(await deliver(fromAlice('hi there'))).toBe(200);
    expect(await nth(1, 'the reply')).toBe('Hello Alice, how can I help?');
    expect(teams.typingCount(CHAT)).toBeGreaterThan(0);
    const reply = teams.sent.find((s) => s.type === 'message')!;
    expect(reply).toMatchObject({ region: 'teams', conversationId: CHAT, activity: { type: 'message', textFormat: 'markdown' } });
    expect(teams.calls.filter((c) => c.kind === 'token').map((c) => c.body)).toContainEqual(
      expect.objectContaining({ grant_type: 'client_credentials', scope: 'https://api.botframework.com/.default' }),
    );
  });

  it('gives one reply to an activity delivered three times', async () => {
    ai.script([{ text: 'Only once.' }]);
    const activity = fromAlice('are you there?');
    expect(await Promise.all([deliver(activity), deliver(activity), deliver(activity)])).toEqual([200, 200, 200]);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    expect(texts()).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', CONVERSATION)).toHaveLength(1);
  });

  it('refuses an activity whose token is forged, for another audience or issuer, expired, outliving the replay window or missing (401), or a malformed one (400): nothing written', async () => {
    const activity = fromAlice('let me in');
    const serviceUrl = activity.serviceUrl as string;
    for (const token of [
      botServiceToken(teams, serviceUrl, { wrongKey: true }),
      botServiceToken(teams, serviceUrl, { audience: '99999999-0000-4000-8000-000000000000' }),
      botServiceToken(teams, serviceUrl, { expiresInSeconds: -3600 }),
      botServiceToken(teams, serviceUrl, { issuer: 'https://sts.windows.net/99999999-1111-4111-8111-111111111111/' }),
      botServiceToken(teams, serviceUrl, { expiresInSeconds: 3 * 24 * 3600 }),
      'not-a-jwt',
      null,
    ]) {
      expect((await postActivity(teams, url, activity, token)).status).toBe(401);
    }
    expect((await postActivity(teams, url, { type: 'message', text: 'no conversation' })).status).toBe(400);
    expect(await conversationKeys()).toEqual([]);
    expect(ai.requests).toEqual([]);
    expect(teams.calls).toEqual([]);
  });

  it('refuses an activity whose serviceUrl is off the allow-list or not the one its token names: no token goes there, nothing written', async () => {
    const forged = fromAlice('send your token to me', { serviceUrl: 'https://collector.example.net/teams/' });
    expect((await postActivity(teams, url, forged)).status).toBe(401);
    const switched = fromAlice('reply elsewhere', { serviceUrl: teams.serviceUrl('amer') });
    expect((await postActivity(teams, url, switched, botServiceToken(teams, teams.serviceUrl('emea')))).status).toBe(401);
    expect(await conversationKeys()).toEqual([]);
    expect(teams.calls).toEqual([]);
  });

  it('steers a message sent while the agent runs a slow tool into the same run, and the reply answers both', async () => {
    ai.script([{ toolCalls: [{ id: 'call_l', name: 'lookup', args: {} }] }, { text: 'Here is the schedule, weekend included.' }]);
    expect(await deliver(fromAlice('look up the schedule'))).toBe(200);
    await lookup.started;
    expect(await deliver(fromAlice('also the weekend please'))).toBe(200);
    await waitFor(async () => (await h.entries('steering.queued', CONVERSATION)).length === 1, 10_000, 'the message steered');
    lookup.release('SCHEDULE');
    expect(await nth(1, 'the reply')).toBe('Here is the schedule, weekend included.');
    await h.idle(15_000, CONVERSATION);
    expect(texts()).toHaveLength(1);
    expect(userTextsOf('look up the schedule')[1]).toEqual(['look up the schedule', 'also the weekend please']);
    expect(await h.entries('run.started', CONVERSATION)).toHaveLength(1);
  });

  it('honours a rate limit: after a 429 with Retry-After the reply goes out once', async () => {
    ai.script([{ text: 'After the wait.' }]);
    teams.failNext('send', { status: 429, retryAfterSeconds: 1 });
    expect(await deliver(fromAlice('hello'))).toBe(200);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    expect(teams.calls.filter((c) => c.kind === 'send').map((c) => c.status)).toEqual([429, 200]);
    expect(texts()).toEqual(['After the wait.']);
  });

  it('splits a reply longer than 6000 characters into messages within the limit, nothing lost', async () => {
    const words = Array.from({ length: 2600 }, (_, i) => `word${i}`);
    ai.script([{ text: words.join(' ') }]);
    expect(await deliver(fromAlice('tell me everything'))).toBe(200);
    await teams.waitUntil(() => texts().join(' ').split(/\s+/).length >= words.length && true, 15_000, 'every part');
    await h.idle(15_000, CONVERSATION);
    expect(texts().length).toBeGreaterThanOrEqual(3);
    for (const t of texts()) expect(t.length).toBeLessThanOrEqual(6000);
    expect(texts().join(' ').split(/\s+/)).toEqual(words);
    expect(teams.calls.every((c) => c.status < 400)).toBe(true);
  });

  it('sends proactively to the service URL the conversation was last seen at, and to the configured one for a conversation never seen', async () => {
    ai.script([{ text: 'Noted.' }]);
    expect(await deliver(fromAlice('remind me later', { serviceUrl: teams.serviceUrl('amer') }))).toBe(200);
    await nth(1, 'the reply');
    await h.idle(15_000, CONVERSATION);
    await plugin.outbound.send(CONVERSATION, 'Your reminder: call Bob.');
    expect(teams.sent.filter((s) => s.type === 'message').map((s) => [s.region, s.text])).toEqual([
      ['amer', 'Noted.'],
      ['amer', 'Your reminder: call Bob.'],
    ]);
    await plugin.outbound.send('teams:a:1never-seen', 'Hello from a schedule.');
    expect(teams.sent.at(-1)).toMatchObject({ region: 'teams', conversationId: 'a:1never-seen', text: 'Hello from a schedule.' });
  });
});

describe('teams cards', () => {
  it('asks for an approval with Adaptive Card buttons; a stranger’s click does not count, the asker’s runs the tool once and updates the card', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 40 } }] }, { text: 'Refunded 40.' }]);
    expect(await deliver(fromAlice('refund 40'))).toBe(200);
    await nth(1, 'the approval request');
    const request = card(1);
    expect(request.activity.attachments[0].contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(request.buttons.map((b) => b.title)).toEqual(['Approve', 'Deny']);

    expect(await click(request, '/approve', TEAMS_BOB)).toBe(200);
    expect(await nth(2, 'the refusal')).toBe('You are not allowed to decide this request. Nothing changed.');
    expect(refunds).toEqual([]);
    expect(request.buttons).toHaveLength(2);

    expect(await click(request, '/approve')).toBe(200);
    await teams.waitUntil(() => texts().includes('Refunded 40.'), 15_000, 'the answer');
    await h.idle(15_000, CONVERSATION);
    expect(refunds).toEqual([40]);
    expect(texts()).toContain('Approved: refund will run.');
    expect(request.text).toContain('Approved by');
    expect(request.buttons).toEqual([]);
  });

  it('shows ask_user options as buttons; the click is the answer', async () => {
    const ask = { question: 'Which plan?', options: ['Basic', 'Pro', 'Team'] };
    ai.script([{ toolCalls: [{ id: 'call_q', name: 'ask_user', args: ask }] }, { text: 'Team plan booked.' }]);
    expect(await deliver(fromAlice('book me a plan'))).toBe(200);
    await nth(1, 'the question');
    const question = card(1);
    expect(question.buttons.map((b) => b.title)).toEqual(ask.options);
    expect(await click(question, '/choose')).toBe(200);
    await teams.waitUntil(() => texts().includes('Team plan booked.'), 15_000, 'the answer');
    const result = JSON.parse(ai.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);
    expect(result).toMatchObject({ answer: 'Basic', option: 1 });
    expect(question.buttons).toEqual([]);
  });
});
