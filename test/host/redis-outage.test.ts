/**
 * A Redis restart under a running host and runner (one process, as
 * `npm start` runs them): webhook ingress answers 503 while Redis is down
 * (never holds the request for the outage), a run created just before the
 * outage whose job was lost is found at the reconnect (not at the
 * reconciler's next routine pass), everything is answered exactly once
 * afterwards, and the outage is logged once, never as raw stderr dumps.
 */

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { hostFeatures, runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { type StartedHost, startHost } from '../../host/main.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { type StartedRunner, startRunner } from '../../runner/main.js';
import type { AppContext } from '../../src/app-context.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { closeRedis, watchRedis } from '../../src/redis/connection.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { createTestContext } from '../../testing/runner-context.js';
import { waitFor } from '../../testing/wait.js';
import { testPrefix } from '../helpers/redis.js';
import { type RestartableRedis, startRestartableRedis } from '../helpers/restartable-redis.js';
import { fakeModel } from '../runner/harness.js';

const SECRET = 'whsec-outage-0123456789abcdef';
const CHANNEL = 'webhook:e2e';

interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

let server: RestartableRedis;
let fake: FakeOpenAIServer;
let callbacks: CallbackServer;
let parts: { ctx: AppContext; http: HttpServer; host: StartedHost; runner: StartedRunner; url: string; unwatch(): void } | undefined;
let lines: LogLine[];

beforeEach(async () => {
  server = await startRestartableRedis();
  fake = await startFakeOpenAI();
  fake.script((req: { messages: Array<{ role: string; content: unknown }> }) => ({
    text: `answer to ${String(req.messages.filter((m) => m.role === 'user').at(-1)?.content)}`,
  }));
  callbacks = await startCallbackServer(SECRET);
  lines = [];
});
afterEach(async () => {
  vi.restoreAllMocks();
  if (!server.running) await server.start();
  if (parts) {
    await parts.http.close();
    await parts.runner.close(1000);
    await parts.host.stop();
    parts.unwatch();
    await closeRedis(parts.ctx.redis);
    parts = undefined;
  }
  await callbacks.close();
  await fake.close();
  await server.destroy();
});

async function startSystem(): Promise<NonNullable<typeof parts>> {
  const base = createTestContext({ redisUrl: server.url, prefix: testPrefix() });
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) } });
  const ctx: AppContext = { ...base, logger };
  // What the process entry does for its shared connection.
  const unwatch = watchRedis(ctx.redis, logger);
  const webhook = (): ChannelPlugin =>
    createWebhookPlugin(
      'e2e',
      { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 },
      { logger, redis: ctx.redis, prefix: ctx.config.redis.prefix },
    );
  const http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger });
  const host = await startHost({ ...ctx, http }, { channels: [webhook()], steeringCapable: true, features: hostFeatures() });
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), builtins: { currentTime: false } }),
    channels: [webhook()],
    features: runnerFeatures(),
  });
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  return { ctx, http, host, runner, url, unwatch };
}

async function post(url: string, id: string, conversation: string, text: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = JSON.stringify({ id, conversation, text, sender: { id: 'ann', name: 'Ann' } });
  // The outage lasts until the test restarts Redis: a request held for it would hit this bound instead.
  const res = await fetch(`${url}/webhooks/e2e`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
    body: raw,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('a Redis restart under a running host and runner', () => {
  it('answers 503 while Redis is down, finds the run whose job was lost at the reconnect, and answers everything once', async () => {
    const stderr = vi.spyOn(process.stderr, 'write');
    const consoleError = vi.spyOn(console, 'error');
    parts = await startSystem();
    const { host, url, ctx } = parts;
    // Far longer than this test: a run found quickly was found by the reconnect pass, not a routine one.
    expect(ctx.config.runs.reconcileIntervalMs).toBeGreaterThanOrEqual(60_000);

    expect((await post(url, 'm1', 'before', 'first')).status).toBe(202);
    await callbacks.waitForAccepted(1, 15_000);

    // A run created just before the outage, whose job never made it (its host died, or the enqueue was lost).
    const orphan = await host.dispatch.ingest({
      conversationId: `${CHANNEL}:orphan`,
      updateKey: `${CHANNEL}:orphan-1`,
      sender: { id: 'ann' },
      text: 'orphaned',
    });
    expect(orphan.kind).toBe('new-run');
    const orphanRun = (orphan as { runId: string }).runId;
    expect(await host.queue.queue.getJob(orphanRun)).toBeUndefined();

    let reconnects = 0;
    ctx.redis.on('reconnecting', () => reconnects++);
    await server.stop();
    // Ingress while Redis is down: 503 (the platform retries), answered while the outage still lasts.
    const during = await post(url, 'm2', 'during', 'second');
    expect(during.status).toBe(503);
    expect(server.running).toBe(false);
    const again = await post(url, 'm2', 'during', 'second');
    expect(again.status).toBe(503);
    // Let the outage last a few reconnect attempts of every connection before Redis comes back.
    await waitFor(() => reconnects >= 4, 15_000, 'reconnect attempts');

    await server.start();
    // Found at the reconnect and answered.
    await waitFor(() => callbacks.texts('orphan').length > 0, 20_000, 'orphaned run answered');
    // The platform's retry of the refused request now goes through, once.
    await waitFor(async () => (await post(url, 'm2', 'during', 'second')).status === 202 || undefined, 10_000, 'ingress back');
    await waitFor(() => callbacks.texts('during').length > 0, 15_000, 'retried message answered');
    expect((await post(url, 'm2', 'during', 'second')).status).toBe(200); // a duplicate now

    await waitFor(async () => (await host.dispatch.status(`${CHANNEL}:during`)).activeRunId === undefined || undefined, 10_000, 'idle');
    expect(callbacks.texts('before')).toEqual(['answer to first']);
    expect(callbacks.texts('orphan')).toEqual(['answer to orphaned']);
    expect(callbacks.texts('during')).toEqual(['answer to second']);

    // Logged once per state change, through the logger; nothing raw on stderr.
    const warned = lines.filter((l) => l.level >= 40).map((l) => l.msg);
    expect(warned.filter((m) => m.includes('redis connection lost'))).toHaveLength(1);
    expect(lines.filter((l) => l.msg.includes('redis connection restored'))).toHaveLength(1);
    // The only other warning: the orphaned run the reconciler re-enqueued.
    expect(warned.filter((m) => !m.includes('redis connection lost'))).toEqual(['reconciler re-enqueued a run whose job was missing']);
    const raw = [...stderr.mock.calls.map((c) => String(c[0])), ...consoleError.mock.calls.map((c) => c.map(String).join(' '))];
    expect(raw.filter((s) => /Unhandled error event|ECONNREFUSED|Connection is closed/.test(s))).toEqual([]);
  });
});
