/**
 * Two deployments on one Redis with different key prefixes and the same
 * queue name (the default) each answer all of their own messages, and never
 * take or touch the other's runs, jobs or keys: the BullMQ queue lives under
 * the deployment's prefix (`{<prefix>-bull}`).
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostFeatures, runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { type StartedHost, startHost } from '../../host/main.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { type StartedRunner, startRunner } from '../../runner/main.js';
import type { AppContext } from '../../src/app-context.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { closeRedis } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { createTestContext } from '../../testing/runner-context.js';
import { waitFor } from '../../testing/wait.js';
import { testPrefix } from '../helpers/redis.js';
import { type RestartableRedis, startRestartableRedis } from '../helpers/restartable-redis.js';
import { fakeModel } from '../runner/harness.js';

const SECRET = 'whsec-isolation-0123456789abcdef';
const MESSAGES = 6;

interface App {
  prefix: string;
  ctx: AppContext;
  http: HttpServer;
  host: StartedHost;
  runner: StartedRunner;
  url: string;
  callbacks: CallbackServer;
}

let server: RestartableRedis;
let fake: FakeOpenAIServer;
let apps: App[] = [];

beforeEach(async () => {
  // A Redis of its own, so every key in it belongs to one of the two apps.
  server = await startRestartableRedis();
  fake = await startFakeOpenAI();
  fake.script((req: { messages: Array<{ role: string; content: unknown }> }) => ({
    text: `answer to ${String(req.messages.filter((m) => m.role === 'user').at(-1)?.content)}`,
  }));
});
afterEach(async () => {
  for (const a of apps) {
    await a.http.close();
    await a.runner.close(1000);
    await a.host.stop();
    await closeRedis(a.ctx.redis);
    await a.callbacks.close();
  }
  apps = [];
  await fake.close();
  await server.destroy();
});

async function startApp(): Promise<App> {
  const prefix = testPrefix();
  const callbacks = await startCallbackServer(SECRET);
  const base = createTestContext({ redisUrl: server.url, prefix });
  // Both apps on the default queue name: only the prefix keeps them apart.
  const ctx: AppContext = { ...base, config: { ...base.config, runs: { ...base.config.runs, queueName: 'steerbot-runs' } } };
  const webhook = (): ChannelPlugin =>
    createWebhookPlugin('e2e', { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 }, { logger: ctx.logger, redis: ctx.redis, prefix });
  const http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger: ctx.logger });
  const host = await startHost({ ...ctx, http }, { channels: [webhook()], steeringCapable: true, features: hostFeatures() });
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), builtins: { currentTime: false } }),
    channels: [webhook()],
    features: runnerFeatures(),
  });
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  return { prefix, ctx, http, host, runner, url, callbacks };
}

async function post(app: App, id: string, conversation: string, text: string): Promise<number> {
  const raw = JSON.stringify({ id, conversation, text, sender: { id: 'ann', name: 'Ann' } });
  const res = await fetch(`${app.url}/webhooks/e2e`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
    body: raw,
  });
  await res.arrayBuffer();
  return res.status;
}

describe('two deployments with different prefixes on one Redis', () => {
  it('each answer all of their own messages and never touch the other one', async () => {
    apps = [await startApp(), await startApp()];
    const [a, b] = apps as [App, App];
    expect(a.host.queue.bullPrefix).toBe(bullPrefixFor(a.prefix));
    expect(b.host.queue.bullPrefix).toBe(bullPrefixFor(b.prefix));

    // The same conversation names and message ids in both, sent interleaved.
    const statuses = await Promise.all(
      Array.from({ length: MESSAGES }, (_, i) => [post(a, `m${i}`, `c${i}`, `A${i}`), post(b, `m${i}`, `c${i}`, `B${i}`)]).flat(),
    );
    expect(statuses.every((s) => s === 202)).toBe(true);
    await a.callbacks.waitForAccepted(MESSAGES, 20_000);
    await b.callbacks.waitForAccepted(MESSAGES, 20_000);

    for (const [app, name] of [
      [a, 'A'],
      [b, 'B'],
    ] as const) {
      for (let i = 0; i < MESSAGES; i++) {
        await waitFor(async () => (await app.host.dispatch.status(`webhook:e2e:c${i}`)).activeRunId === undefined || undefined, 10_000, 'idle');
        expect(app.callbacks.texts(`c${i}`)).toEqual([`answer to ${name}${i}`]);
        // Only this app's runner ever took this app's runs.
        const started = (await readRange(app.ctx.redis, conversationKeys(app.prefix, `webhook:e2e:c${i}`).log)).filter((e) => e.kind === 'run.started');
        expect(started.map((e) => (e as { owner: string }).owner)).toEqual([app.runner.owner]);
      }
    }

    // Every key in Redis belongs to one of the two, under its prefix or its queue's.
    const keys = await a.ctx.redis.keys('*');
    const owners = [a, b].flatMap((app) => [`${app.prefix}:`, `${bullPrefixFor(app.prefix)}:`]);
    expect(keys.filter((k) => !owners.some((p) => k.startsWith(p)))).toEqual([]);
    // Each queue carried only jobs of its own app's runs (a completed run job is removed at once: its events stream
    // names every job added).
    for (const app of [a, b]) {
      const events = await app.ctx.redis.xrange(app.host.queue.queue.keys.events!, '-', '+');
      const added = events.map(([, f]) => Object.fromEntries(chunk(f))).filter((e) => e.event === 'added');
      expect(added.length).toBeGreaterThanOrEqual(MESSAGES);
      const runs = (await app.ctx.redis.keys(`${app.prefix}:*:run:*`)).map((k) => k.split(':run:')[1]);
      for (const e of added) expect(runs).toContain(e.jobId);
    }
  });
});

/** Field-value pairs of a stream entry as [field, value] tuples. */
function chunk(fields: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < fields.length; i += 2) out.push([fields[i]!, fields[i + 1]!]);
  return out;
}
