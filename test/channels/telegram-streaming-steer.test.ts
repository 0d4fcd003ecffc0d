/**
 * End to end with streaming on: a message steered in while the reply streams.
 * The Telegram webhook (real grammY plugin, streaming) → the channel host →
 * Redis → BullMQ → the runner with the local agent streaming from the fake
 * model server → the fake Bot API. The draft is edited in place, the steered
 * message joins the run at the turn boundary (after the tool batch), and the
 * final reply is the complete answer, sent once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { FetchTap, fakeModel, gatedTool, RunnerHarness } from '../runner/harness.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from './telegram-harness.js';

const SECRET = 'stream_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;
/** The first step: streamed slowly (more than one edit interval), then a tool call. */
const CHECKING = 'Let me check the opening hours of every museum on your list before I put the whole day together for you.';
/** The final answer: streamed too, after the tool batch. */
const FINAL = 'Here is your day: the science museum at ten, lunch by the river, and the art museum until six, with the children in mind.';

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
const lookup = gatedTool();

beforeEach(async () => {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  lookup.reset();
  h = await RunnerHarness.start();
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    telegram: { streaming: true },
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url, new FetchTap()), streaming: true, tools: [lookup.tool], builtins: { currentTime: false } }),
  }));
});

afterEach(() => stopTelegramSystem({ plugin, http }, h, tg, ai));

const post = (update: unknown): Promise<number> => postUpdate(http, SECRET, update);

const userTexts = (i: number): unknown[] =>
  ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);

describe('a streamed telegram reply with a message steered in while it streams', () => {
  it('is edited in place, takes the steered message at the turn boundary, and ends complete, once', async () => {
    ai.script((_req, i) =>
      i === 0 ? { text: CHECKING, chunkDelayMs: 120, toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] } : { text: FINAL, chunkDelayMs: 60 },
    );
    expect(await post(messageUpdate({ text: 'plan a museum day' }))).toBe(200);
    // The draft is out and the first step is still streaming: steer now.
    await tg.waitForCalls('sendMessage', 1, 15_000);
    expect(await post(messageUpdate({ text: 'we have two small children' }))).toBe(200);
    const [queued] = await h.entries('steering.queued', CONVERSATION);
    expect(queued).toBeDefined();
    await lookup.started;
    lookup.release('open 10-18');
    await h.idle(15_000, CONVERSATION);

    // It arrived while the first step streamed (before that step was recorded), and was pulled after the tool batch.
    const [firstStep] = await h.entries('model.step', CONVERSATION);
    expect(queued!.seq).toBeLessThan(firstStep!.seq);
    const [injected] = await h.entries('steering.injected', CONVERSATION);
    expect(injected).toMatchObject({ run: queued!.run });
    expect(injected!.seq).toBeGreaterThan(firstStep!.seq);
    expect(ai.requests).toHaveLength(2);
    expect(userTexts(0)).toEqual(['plan a museum day']);
    expect(userTexts(1)).toEqual(['plan a museum day', 'we have two small children']);
    expect((await h.entries('run.started', CONVERSATION)).map((e) => e.run)).toEqual([queued!.run]);

    // One message, edited in place to the complete final answer.
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(tg.sent).toHaveLength(1);
    const edits = tg.callsOf('editMessageText');
    expect(edits.length).toBeGreaterThanOrEqual(2);
    for (const e of edits) expect(Number(e.payload.message_id)).toBe(tg.sent[0]!.messageId);
    expect(tg.sent[0]!.text).toBe(FINAL);
  });
});
