/**
 * Status reactions on Telegram (`reactions`, opt-in): the person's message
 * shows 👀 once a run takes it and 👍 once its answer was sent, or 😢 when
 * the run ended without one; end to end through the real grammY plugin, the
 * host, Redis, the runner and the local agent against the fake Bot API.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { TelegramConfigInput } from '../../plugins/telegram/channel.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { fakeModel, RunnerHarness, waitFor } from '../runner/harness.js';
import { postUpdate, startTelegramSystem } from './telegram-harness.js';

const SECRET = 'e2e_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer | undefined;
let plugin: ChannelPlugin | undefined;

beforeEach(async () => {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  h = await RunnerHarness.start({ followUpsOnFailure: 0 });
});

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  await h.close();
  await tg.close();
  await ai.close();
  plugin = http = undefined;
});

async function start(telegram: Partial<TelegramConfigInput>): Promise<void> {
  const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, maxRetries: 0 });
  ({ http, plugin } = await startTelegramSystem({ h, tg, secret: SECRET, agent, telegram }));
}

/** Posts a private message from Alice and waits for its run to end; returns the message id and the outcome. */
async function ask(text: string, messageId: number): Promise<string> {
  const before = (await h.entries('run.started', CONVERSATION)).length;
  expect(await postUpdate(http!, SECRET, messageUpdate({ text, messageId }))).toBe(200);
  const started = await waitFor(
    async () => {
      const all = await h.entries('run.started', CONVERSATION);
      return all.length > before && all.at(-1);
    },
    15_000,
    'run started',
  );
  return (await h.runEnded(started.run, 15_000, CONVERSATION)).outcome;
}

const reactionCalls = (messageId: number) =>
  tg.calls.filter((c) => c.method === 'setMessageReaction' && c.payload.message_id === messageId).map((c) => c.payload.reaction[0]?.emoji);

describe('status reactions on Telegram', () => {
  it('show 👀 when the run takes the message, then 👍 after the answer was sent', async () => {
    await start({ reactions: true });
    ai.script([{ text: 'Hello Alice.' }]);
    expect(await ask('hi', 501)).toBe('completed');

    await tg.waitUntil(() => tg.reactions.get(`${ALICE.id}:501`)?.[0] === '👍', 10_000, 'answered reaction');
    expect(reactionCalls(501)).toEqual(['👀', '👍']);
    // 👍 only once the reply was on the platform.
    const order = tg.calls.filter((c) => c.method === 'sendMessage' || c.method === 'setMessageReaction').map((c) => c.method);
    expect(order.lastIndexOf('setMessageReaction')).toBeGreaterThan(order.indexOf('sendMessage'));
    expect(tg.sent.map((m) => m.text)).toEqual(['Hello Alice.']);
  });

  it('show the configured emoji, and 😢 when the run fails without an answer', async () => {
    await start({ reactions: { answered: '👌' } });
    ai.script([{ error: { status: 400, message: 'bad request', type: 'invalid_request_error' } }]);
    expect(await ask('hi', 502)).toBe('failed');
    await tg.waitUntil(() => tg.reactions.get(`${ALICE.id}:502`)?.[0] === '😢', 10_000, 'failed reaction');
    expect(reactionCalls(502)).toEqual(['👀', '😢']);

    ai.script([{ text: 'Now it works.' }]);
    expect(await ask('again', 503)).toBe('completed');
    await tg.waitUntil(() => tg.reactions.get(`${ALICE.id}:503`)?.[0] === '👌', 10_000, 'answered reaction');
    expect(reactionCalls(503)).toEqual(['👀', '👌']);
  });

  it('are best effort: a refused reaction does not stop the answer', async () => {
    await start({ reactions: true });
    tg.failNext('setMessageReaction', { error_code: 400, description: 'Bad Request: REACTION_INVALID' }, 2);
    ai.script([{ text: 'Answered anyway.' }]);
    expect(await ask('hi', 504)).toBe('completed');
    expect(tg.sent.map((m) => m.text)).toEqual(['Answered anyway.']);
  });

  it('are off unless configured', async () => {
    await start({});
    ai.script([{ text: 'Plain.' }]);
    expect(await ask('hi', 505)).toBe('completed');
    await tg.waitUntil(() => tg.sent.length >= 1, 10_000, 'the reply');
    expect(tg.calls.filter((c) => c.method === 'setMessageReaction')).toEqual([]);
  });
});
