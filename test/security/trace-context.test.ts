/**
 * Attacks on tracing through the W3C trace context a request carries: the real
 * app (`startApp` from a config file) with a Telegram channel on webhooks, a
 * signed webhook channel and send-and-wake API tokens, the local agent against
 * the fake OpenAI server, and spans recorded by an in-memory exporter under a
 * head sampler that samples no trace of its own (`parentbased_traceidratio`
 * at 0): a span recorded is one a caller's sampled `traceparent` made.
 *
 * - a stranger's `traceparent` on a public route is not continued: it picks
 *   neither the trace id nor the sampling decision, and nothing of it is
 *   recorded or sent on;
 * - the operator's own systems (the webhook channel's signed requests, an API
 *   token's) have their trace continued.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { revokeApiToken } from '../../host/api-tokens.js';
import { signedHeaders } from '../../src/http/signature.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { telegramAppEnv } from '../helpers/app-env.js';
import { cleanupPrefix, testPrefix } from '../helpers/redis.js';

const TELEGRAM_SECRET = 'trace_context_telegram_secret_01';
const WEBHOOK_SECRET = 'whsec-trace-context-0123456789ab';
const CI = 'ci-token-trace-context-0123456789';
const REVOKED = 'old-token-trace-context-012345678';
const STRANGER = { id: 7_310_001, is_bot: false, first_name: 'Mallory' };

// Recorded from the start: the app starts no tracing SDK of its own without `OTEL_*` settings. Ratio 0: the head
// sampler keeps no trace of its own, so every span recorded here is one a caller's sampled trace context made.
const spans = new InMemorySpanExporter();
const provider = new TracerProvider({
  sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0) }),
  spanProcessors: [new SimpleSpanProcessor({ exporter: spans })],
});

/** A sampled W3C `traceparent` whose ids are `t` and `s` repeated. */
const traceparent = (t: string, s: string) => `00-${t.repeat(32)}-${s.repeat(16)}-01`;
const traceOf = (t: string) => t.repeat(32);

describe('a trace context sent with a request', () => {
  let app: RunningApp;
  let tg: FakeTelegram;
  let openai: FakeOpenAIServer;
  let dir: string;
  const prefix = testPrefix();

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    [tg, openai] = await Promise.all([startFakeTelegram(), startFakeOpenAI()]);
    openai.script(() => ({ text: 'noted' }));
    dir = mkdtempSync(join(tmpdir(), 'steerbot-sec-trace-'));
    const file = join(dir, 'steerbot.json');
    writeFileSync(
      file,
      JSON.stringify({
        http: { host: '127.0.0.1' },
        host: {
          api: {
            tokens: [
              { name: 'ci', token: CI, scopes: ['events', 'open'] },
              { name: 'old', token: REVOKED, scopes: ['events', 'open'] },
            ],
          },
        },
        channels: {
          telegram: { apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: TELEGRAM_SECRET, registerCommands: false },
          webhooks: { e2e: { secret: WEBHOOK_SECRET } },
        },
      }),
    );
    const config = await loadConfig({
      file,
      env: {
        ...telegramAppEnv({ prefix, modelUrl: openai.url }),
      },
    });
    app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger: createLogger({ level: 'silent' }), printLogin: () => undefined });
    expect(await revokeApiToken(app.redis, prefix, config.host.api, 'old')).toBe(true);
  }, 30_000);

  afterAll(async () => {
    if (app) {
      await cleanupPrefix(app.ctx.redis, prefix);
      await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix));
      await app.stop();
    }
    await Promise.all([tg?.close(), openai?.close()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
    await provider.shutdown();
    trace.disable();
    context.disable();
  });

  const post = (path: string, body: string, headers: Record<string, string>) =>
    fetch(`${app.address}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const event = (token: string, conversation: string, id: string, tp: string) =>
    post(`/api/conversations/${conversation}/events`, JSON.stringify({ source: 'ci', id, text: `event ${id}` }), {
      authorization: `Bearer ${token}`,
      traceparent: tp,
    });
  const spansOf = (t: string) => spans.getFinishedSpans().filter((s) => s.spanContext().traceId === traceOf(t));
  /** The record's trace context of a conversation's first message. */
  const recordedTrace = async (conversationId: string) => {
    const [entry] = await readRange(app.ctx.redis, conversationKeys(prefix, conversationId).log, { count: 1 });
    return (entry as { trace?: string } | undefined)?.trace;
  };
  /** Waits until the conversation's run has ended (its `run` span, if it had one, is ended by then). */
  const runEnded = (conversationId: string) =>
    waitFor(async () => (await app.ctx.redis.exists(conversationKeys(prefix, conversationId).active)) === 0, 10_000, `${conversationId} idle`);

  it('is not continued for strangers on public routes: they pick no trace id and no sampling decision, and nothing of it is recorded or sent on', async () => {
    // A Telegram delivery (the platform's secret is right; the sender is anyone) with a sampled trace context.
    const update = messageUpdate({ from: STRANGER, text: 'hello, sample me' });
    const tg1 = await post('/telegram/webhook', JSON.stringify(update), {
      'x-telegram-bot-api-secret-token': TELEGRAM_SECRET,
      traceparent: traceparent('a', '1'),
      tracestate: 'steerbot=forced',
    });
    expect(tg1.status).toBe(200);
    await tg.waitUntil(() => tg.sent.some((m) => m.chatId === STRANGER.id && m.text === 'noted'), 10_000, 'the answer to the stranger');
    await runEnded(`telegram:${STRANGER.id}`);

    // Routes that trust an authenticated caller's trace, called by someone who is not one.
    const body = JSON.stringify({ id: 'm1', conversation: 'c1', sender: { id: 'x' }, text: 'hi' });
    const forged = await post('/webhooks/e2e', body, { ...signedHeaders('not-the-secret-0123456789', body), traceparent: traceparent('b', '2') });
    expect(forged.status).toBe(401);
    expect((await event('not-a-token-0123456789', 'telegram:7310003', 'e1', traceparent('c', '3'))).status).toBe(401);
    expect((await event(REVOKED, 'telegram:7310003', 'e2', traceparent('d', '4'))).status).toBe(401);
    // The console's page, open to anyone who can reach it.
    await (await fetch(`${app.address}/console`, { headers: { traceparent: traceparent('e', '5') } })).arrayBuffer();

    const strangers = ['a', 'b', 'c', 'd', 'e'];
    expect(Object.fromEntries(strangers.map((t) => [t, spansOf(t).map((s) => s.name)]))).toEqual(Object.fromEntries(strangers.map((t) => [t, []])));
    // Nothing force-sampled: the sampler keeps no trace of its own, so no span at all.
    expect(spans.getFinishedSpans().map((s) => s.name)).toEqual([]);
    // Not kept for the run (which continues what the record names), nor sent with the model's request.
    expect(await recordedTrace(`telegram:${STRANGER.id}`)).toBeUndefined();
    const asked = openai.requests.filter((r) => JSON.stringify(r.body).includes('hello, sample me'));
    expect(asked).toHaveLength(1);
    expect(JSON.stringify(asked[0]!.headers)).not.toMatch(/a{32}|steerbot=forced|traceparent|tracestate/);
  });

  it("is continued for the operator's own systems: the webhook channel's signed requests and an API token's", async () => {
    const body = JSON.stringify({ id: 'm2', conversation: 'c4', sender: { id: 'crm' }, text: 'from the CRM' });
    const signed = await post('/webhooks/e2e', body, { ...signedHeaders(WEBHOOK_SECRET, body), traceparent: traceparent('f', '6') });
    expect(signed.status).toBe(202);
    // An event for a Telegram chat the bot has not talked in yet (the token may open it).
    expect((await event(CI, 'telegram:7310002', 'e3', traceparent('9', '7'))).status).toBe(202);

    for (const [t, s, conversationId, route] of [
      ['f', '6', 'webhook:e2e:c4', '/webhooks/e2e'],
      ['9', '7', 'telegram:7310002', '/api/conversations/:conversation/events'],
    ] as const) {
      await runEnded(conversationId);
      const run = await waitFor(() => spansOf(t).find((x) => x.name === 'run'), 10_000, `the run span in the trace ${t}`);
      const request = spansOf(t).find((x) => x.attributes['http.route'] === route);
      expect(request?.parentSpanContext?.spanId).toBe(s.repeat(16));
      expect(run.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);
      expect(await recordedTrace(conversationId)).toBe(`00-${traceOf(t)}-${request?.spanContext().spanId}-01`);
    }
  });
});
