/**
 * Streamed Telegram replies through the runner's delivery sink (`RunDelivery`)
 * and the real Telegram plugin (real grammY client) against the fake Bot API:
 * a streamed reply ends formatted exactly like the same answer sent whole,
 * and a 429's `retry_after` holds every later call of the conversation —
 * the final send or edit, typing, the next run's first message. Times are
 * the fake's own arrival times of the requests, compared with the 429 it sent.
 */

import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { markdownToTelegramHtml } from '../../plugins/telegram/markdown.js';
import { heldUntil } from '../../runner/delivery/rate-hold.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type ApiCall, FAKE_TOKEN, type FakeTelegram, type ScriptedFailure, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { FetchTap, fakeModel, RunnerHarness } from '../runner/harness.js';

const STREAMED = 'telegram:1001';
const WHOLE = 'telegram:1002';
const ANSWER = '**Plan**\n\n- read `config.ts`\n- fix the <bug> & test\n\n```ts\nconst a = 1 < 2;\n```';
const TOO_MANY = (seconds: number): ScriptedFailure => ({
  error_code: 429,
  description: `Too Many Requests: retry after ${seconds}`,
  parameters: { retry_after: seconds },
});
const CANT_PARSE: ScriptedFailure = { error_code: 400, description: 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0' };
const logger = createLogger({ level: 'silent' });

/** The fake Bot API, Redis on a fresh prefix, and the real plugin's outbound side (streaming on; runners never start the plugin). */
let h: { fake: FakeTelegram; redis: Redis; prefix: string; outbound: ChannelOutbound };
let runs = 0;

beforeEach(async () => {
  const fake = await startFakeTelegram();
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const plugin = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: fake.apiRoot, mode: 'webhook', webhookSecret: 'w'.repeat(16), registerCommands: false, streaming: true },
    { logger, redis, prefix },
  );
  h = { fake, redis, prefix, outbound: plugin.outbound };
});
afterEach(async () => {
  await h.fake.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
});

function delivery(conversationId: string, extra: { maxAttempts?: number; typingIntervalMs?: number } = {}): RunDelivery {
  return new RunDelivery({
    client: h.redis,
    prefix: h.prefix,
    conversationId,
    runId: `run${++runs}`,
    resolve: () => h.outbound,
    logger,
    ...extra,
  });
}

/** The calls that reached the fake after `call` (in arrival order). */
const callsAfter = (call: ApiCall): ApiCall[] => h.fake.calls.slice(h.fake.calls.indexOf(call) + 1);

/** The single call of `method` the fake answered with `status`. */
function failedCall(method: string, status: number): ApiCall {
  const failed = h.fake.callsOf(method).filter((c) => c.outcome === status);
  expect(failed).toHaveLength(1);
  return failed[0]!;
}

describe('a streamed telegram reply', () => {
  it('ends formatted exactly like the same answer sent whole', async () => {
    const streamed = delivery(STREAMED);
    streamed.delta('**Plan**\n\n- read ');
    await h.fake.waitForCalls('sendMessage', 1);
    streamed.delta('`config.ts`');
    await streamed.message(ANSWER);
    await delivery(WHOLE).message(ANSWER);

    const [live, whole] = h.fake.sent;
    expect(h.fake.sent).toHaveLength(2);
    expect(whole).toMatchObject({ chatId: 1002, parseMode: 'HTML' });
    expect(whole!.raw).toContain('<b>Plan</b>');
    // The streamed message was edited to the very text and formatting the whole send used.
    expect(live).toMatchObject({ chatId: 1001, parseMode: whole!.parseMode, raw: whole!.raw, text: whole!.text });
    expect(h.fake.callsOf('editMessageText').at(-1)!.payload).toMatchObject({ parse_mode: 'HTML', text: whole!.raw });
  });

  it('ends as plain text when Telegram cannot parse the formatted edit, as a whole send does', async () => {
    const streamed = delivery(STREAMED);
    streamed.delta('draft');
    await h.fake.waitForCalls('sendMessage', 1);
    h.fake.failNext('editMessageText', CANT_PARSE);
    await streamed.message(ANSWER);

    const edits = h.fake.callsOf('editMessageText');
    expect(edits.map((c) => [c.outcome, c.payload.parse_mode])).toEqual([
      [400, 'HTML'],
      ['ok', undefined],
    ]);
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({ parseMode: undefined, text: ANSWER });
  });
});

describe('a 429 on a streamed telegram reply', () => {
  it('on the draft: the final sendMessage waits retry_after, and goes out formatted', async () => {
    h.fake.failNext('sendMessage', TOO_MANY(1));
    const d = delivery(STREAMED);
    d.delta('a first draft');
    await h.fake.waitForCalls('sendMessage', 1);
    await d.message(ANSWER);

    const limited = failedCall('sendMessage', 429);
    const later = callsAfter(limited);
    expect(later.map((c) => [c.method, c.outcome])).toEqual([['sendMessage', 'ok']]);
    expect(later[0]!.at - limited.at).toBeGreaterThanOrEqual(1000);
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({ parseMode: 'HTML' });
    expect(h.fake.sent[0]!.raw).toContain('<b>Plan</b>');
  });

  it('on a streaming edit: no later call (edit, final edit, typing) reaches Telegram before retry_after', async () => {
    const d = delivery(STREAMED, { typingIntervalMs: 50 });
    d.delta('one');
    await h.fake.waitForCalls('sendMessage', 1);
    h.fake.failNext('editMessageText', TOO_MANY(1));
    d.delta(' two');
    // The throttled edit goes out about a second later and is refused.
    await h.fake.waitUntil(() => h.fake.callsOf('editMessageText').some((c) => c.outcome === 429), 5000, 'the rate-limited edit');
    // Typing starts once the client has the 429 (a call sent before the answer arrived could not know of it).
    await waitFor(() => heldUntil(h.outbound, STREAMED, Date.now()) > 0 || undefined, 5000, 'the hold');
    d.typing();
    d.delta(' three');
    await d.message('one two **three**');
    await h.fake.waitUntil(() => h.fake.callsOf('sendChatAction').length > 0, 5000, 'typing after the hold');
    d.close();

    const limited = failedCall('editMessageText', 429);
    const later = callsAfter(limited);
    expect(later.map((c) => c.method)).toContain('editMessageText');
    for (const c of later) expect(c.at - limited.at, `${c.method} at +${c.at - limited.at} ms`).toBeGreaterThanOrEqual(1000);
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({ text: 'one two three', parseMode: 'HTML', raw: 'one two <b>three</b>' });
  });

  it('holds the next run of the conversation too, and not other conversations', async () => {
    h.fake.failNext('sendMessage', TOO_MANY(1));
    // A run that gives up after the 429 (one attempt) and ends.
    await delivery(STREAMED, { maxAttempts: 1 }).message('lost to the rate limit');
    const limited = failedCall('sendMessage', 429);

    await Promise.all([delivery(STREAMED).message('the next run'), delivery(WHOLE).message('another chat')]);
    const later = callsAfter(limited);
    const next = later.find((c) => c.payload.chat_id === 1001)!;
    const other = later.find((c) => c.payload.chat_id === 1002)!;
    expect(next.at - limited.at).toBeGreaterThanOrEqual(1000);
    // Another chat is not held: it went out before the held one.
    expect(later.indexOf(other)).toBeLessThan(later.indexOf(next));
    expect(h.fake.sent.map((m) => [m.chatId, m.text])).toEqual([
      [1002, 'another chat'],
      [1001, 'the next run'],
    ]);
  });
});

describe('end to end: a runner streams a markdown answer to telegram', () => {
  let ai: FakeOpenAIServer;
  let runner: RunnerHarness;
  let tap: FetchTap;

  beforeEach(async () => {
    ai = await startFakeOpenAI();
    tap = new FetchTap();
    // Slow enough that the draft goes out before the answer is complete.
    ai.script(() => ({ text: ANSWER, chunkDelayMs: 40 }));
    runner = await RunnerHarness.start();
    runner.runners.push(
      await startRunner(runner.ctx, {
        plugin: createLocalAgentPlugin({ model: fakeModel(ai.url, tap), streaming: true, builtins: { currentTime: false } }),
        resolveOutbound: (cid) => (cid.startsWith('telegram:') ? h.outbound : undefined),
        lockDurationMs: 2000,
        stalledIntervalMs: 500,
        features: runnerFeatures(),
      }),
    );
  });
  afterEach(async () => {
    await runner.close();
    await ai.close();
  });

  /** Ingests a question into the streamed chat and waits until its run has ended and the conversation is idle. */
  async function ask(): Promise<void> {
    const r = await runner.ingest('what is the plan?', { conversationId: STREAMED });
    expect(r.kind).toBe('new-run');
    await runner.runEnded((r as { runId: string }).runId, 10_000, STREAMED);
    await runner.idle(10_000, STREAMED);
  }

  it('shows a draft while streaming and ends formatted like a whole send, in one message', async () => {
    await ask();
    expect(h.fake.callsOf('sendMessage')).toHaveLength(1);
    expect(h.fake.callsOf('editMessageText').length).toBeGreaterThanOrEqual(1);
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({ parseMode: 'HTML', raw: markdownToTelegramHtml(ANSWER) });
  });

  it('after a 429 on the draft, sends the answer once, formatted, not before retry_after', async () => {
    h.fake.failNext('sendMessage', TOO_MANY(1));
    await ask();
    const limited = failedCall('sendMessage', 429);
    const delivered = callsAfter(limited).filter((c) => c.method === 'sendMessage' || c.method === 'editMessageText');
    expect(delivered.map((c) => [c.method, c.outcome])).toEqual([['sendMessage', 'ok']]);
    expect(delivered[0]!.at - limited.at).toBeGreaterThanOrEqual(1000);
    expect(h.fake.sent).toHaveLength(1);
    expect(h.fake.sent[0]).toMatchObject({ parseMode: 'HTML', raw: markdownToTelegramHtml(ANSWER) });
  });
});
