/**
 * End to end through the whole system: the Telegram webhook (real grammY
 * plugin) → the real channel host → Redis → BullMQ → the runner with the
 * local agent on the real OpenAI-compatible provider against the fake model
 * server → delivery → the plugin's outbound → the fake Telegram Bot API.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTelegramPlugin } from '../../plugins/telegram/index.js';
import { startRunner } from '../../runner/main.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { startFakeOpenAI, type FakeOpenAIServer } from '../fakes/openai-server.js';
import { ALICE, FAKE_TOKEN, messageUpdate, startFakeTelegram, type FakeTelegram } from '../fakes/telegram-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';

const SECRET = 'e2e_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;

beforeEach(async () => {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  h = await RunnerHarness.start();
  const { logger, redis } = h.ctx;
  http = createHttpServer({ config: h.ctx.config, redis, logger });
  plugin = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: SECRET, registerCommands: false },
    { logger, redis, prefix: h.prefix },
  );
  const host = createChannelHost({
    http,
    redis,
    prefix: h.prefix,
    logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    outbound: (id) => (id === plugin.id ? plugin.outbound : undefined),
  });
  await plugin.start(host);
  await http.ready();
  const runner = await startRunner(h.ctx, {
    plugin: createLocalAgentPlugin({ model: fakeModel(ai.url) }),
    resolveOutbound: (cid) => (cid.startsWith('telegram:') ? plugin.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
  });
  h.runners.push(runner);
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await h.close();
  await tg.close();
  await ai.close();
});

async function post(update: unknown): Promise<number> {
  const res = await http.inject({
    method: 'POST',
    url: '/telegram/webhook',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': SECRET },
    payload: JSON.stringify(update),
  });
  return res.statusCode;
}

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

describe('telegram end to end', () => {
  it('answers a private message in its chat', async () => {
    ai.script([{ text: 'Hello Alice, how can I help?' }]);
    expect(await post(messageUpdate({ text: 'hi there' }))).toBe(200);

    const [reply] = await tg.waitUntil(() => tg.sent.length >= 1 && tg.sent, 15_000, 'a reply');
    expect(reply).toMatchObject({ chatId: ALICE.id, text: 'Hello Alice, how can I help?' });
    const userTurn = ai.requests[0]!.body.messages.find((m: { role: string }) => m.role === 'user');
    expect(JSON.stringify(userTurn)).toContain('hi there');
  });

  it('delivers a reply over 4096 characters split into parts, complete and in order', async () => {
    const paragraphs = Array.from({ length: 30 }, (_, i) => `Paragraph ${i}: ${'lorem ipsum dolor sit amet '.repeat(14)}end ${i}.`);
    const long = paragraphs.join('\n\n');
    expect(long.length).toBeGreaterThan(2 * 4096);
    ai.script([{ text: long }]);
    await post(messageUpdate({ text: 'write a lot' }));

    await h.idle(15_000, CONVERSATION);
    const parts = tg.sent.map((m) => m.text);
    expect(parts.length).toBeGreaterThanOrEqual(3);
    for (const p of parts) expect(p.length).toBeLessThanOrEqual(4096);
    expect(squash(parts.join('\n'))).toBe(squash(long));
    // Cuts fall between paragraphs.
    for (const p of parts) expect(p).toMatch(/end \d+\.$/);
  });

  it('gives one reply to an update delivered three times', async () => {
    ai.script([{ text: 'Only once.' }]);
    const update = messageUpdate({ text: 'are you there?' });
    const statuses = await Promise.all([post(update), post(update), post(update)]);
    expect(statuses).toEqual([200, 200, 200]);

    await tg.waitUntil(() => tg.sent.length >= 1, 15_000, 'a reply');
    await h.idle(15_000, CONVERSATION);
    expect(tg.sent.map((m) => m.text)).toEqual(['Only once.']);
    expect(ai.requests).toHaveLength(1);
    expect(await h.entries('message.received', CONVERSATION)).toHaveLength(1);
  });
});
