/**
 * End to end through the whole system over plain HTTP: a signed webhook
 * POST → host HTTP server (real receive + IngestService) → Redis → BullMQ →
 * runner (`startRunner`, local agent on the real OpenAI-compatible provider
 * against the fake model server) → delivery → the channel's outbound side
 * (created from config) → signed callbacks to a local receiver.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hostFeatures, runnerFeatures } from '../../app/features/index.js';
import { createChannels } from '../../app/start.js';
import { createHttpServer, listen } from '../../host/http.js';
import { startHost } from '../../host/main.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { lockKey, pendingKey } from '../../plugins/webhook/keys.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { startRunner } from '../../runner/main.js';
import type { AppContext } from '../../src/app-context.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import type { RecordEntry, SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, type FakeTurn, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { closeTestContext, createTestContext } from '../../testing/runner-context.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import type { SystemParts } from '../helpers/webhook-system.js';
import { fakeModel, gatedTool, waitFor } from '../runner/harness.js';

const SECRET = 'whsec-e2e-0123456789abcdef';
const MAX_CHARS = 400;
const CONVERSATION = 'ticket-1';
const CID = `webhook:e2e:${CONVERSATION}`;

type System = SystemParts;

/** Not the default, so the first test shows the setting reaches delivery. */
const OUTBOX_TTL = 86_400;

let fake: FakeOpenAIServer;
let callbacks: CallbackServer;
let sys: System;

async function startSystem(tools: AgentTool[] = []): Promise<System> {
  const prefix = testPrefix();
  const base = createTestContext({ redisUrl: redisUrl(), prefix });
  const config = {
    ...base.config,
    runner: { ...base.config.runner, outboxTtlSeconds: OUTBOX_TTL },
    channels: {
      webhooks: { e2e: webhookChannelConfigSchema.parse({ secret: SECRET, callbackUrl: callbacks.url, maxMessageChars: MAX_CHARS, callbackRetryBaseMs: 10 }) },
    },
  };
  const ctx: AppContext = { ...base, config };
  const http = createHttpServer({ config, redis: ctx.redis, logger: ctx.logger });
  const channelDeps = { logger: ctx.logger, redis: ctx.redis, prefix: config.redis.prefix };
  const host = await startHost({ ...ctx, http }, { channels: await createChannels(config, channelDeps), steeringCapable: true, features: hostFeatures() });
  // No resolveOutbound: the runner delivers through the channels created from config.
  const runner = await startRunner(ctx, {
    channels: await createChannels(config, channelDeps),
    plugin: createLocalAgentPlugin({ model: fakeModel(fake.url), tools, builtins: { currentTime: false } }),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  return { ctx, prefix, http, host, runner, url };
}

beforeEach(async () => {
  fake = await startFakeOpenAI();
  callbacks = await startCallbackServer(SECRET);
});
afterEach(async () => {
  if (sys) {
    await sys.http.close();
    await sys.runner.close(1000);
    await sys.host.queue.queue.obliterate({ force: true });
    await sys.host.stop();
    await cleanupPrefix(sys.ctx.redis, sys.prefix);
    await cleanupPrefix(sys.ctx.redis, `${bullPrefixFor(sys.prefix)}:${sys.ctx.config.runs.queueName}`);
    await closeTestContext(sys.ctx);
  }
  await callbacks.close();
  await fake.close();
});

let ids = 0;
function message(text: string, id = `u${++ids}`) {
  return JSON.stringify({ id, conversation: CONVERSATION, sender: { id: 'ann', name: 'Ann' }, text });
}

async function post(raw: string, headers = signedHeaders(SECRET, raw)) {
  const res = await fetch(`${sys.url}/webhooks/e2e`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const record = (): Promise<SeqEntry[]> => readRange(sys.ctx.redis, conversationKeys(sys.prefix, CID).log);
async function entries<K extends RecordEntry['kind']>(kind: K): Promise<Array<SeqEntry<Extract<RecordEntry, { kind: K }>>>> {
  return (await record()).filter((e): e is SeqEntry<Extract<RecordEntry, { kind: K }>> => e.kind === kind);
}
const runEnded = (runId: string) => waitFor(async () => (await entries('run.ended')).find((e) => e.run === runId), 10_000, `run.ended of ${runId}`);
/** Waits until the host has POSTed every reply stored so far (the channel has no conversation pending). */
const callbacksDrained = () =>
  waitFor(async () => (await sys.ctx.redis.zcard(pendingKey(sys.prefix, 'webhook:e2e'))) === 0 || undefined, 10_000, 'every reply called back');
const userTexts = (i: number): unknown[] =>
  fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);

describe('webhook channel end to end', () => {
  it('answers a message with a signed callback', async () => {
    sys = await startSystem();
    fake.script([{ text: 'Hello Ann, how can I help?' }]);
    const res = await post(message('hi there'));
    expect(res).toMatchObject({ status: 202, body: { result: 'new-run', runId: expect.any(String) } });

    const [cb] = await callbacks.waitForAccepted(1);
    expect(cb!.signed).toBe(true);
    expect(cb!.body).toMatchObject({
      conversation: CONVERSATION,
      text: 'Hello Ann, how can I help?',
      messageId: expect.stringMatching(new RegExp(`^${res.body.runId}:\\d+:0$`)),
    });
    expect((await runEnded(res.body.runId)).outcome).toBe('completed');
    expect(userTexts(0)).toEqual(['hi there']);
    const outboxTtl = await sys.ctx.redis.ttl(conversationKeys(sys.prefix, CID).outbox);
    expect(outboxTtl).toBeGreaterThan(OUTBOX_TTL - 100);
    expect(outboxTtl).toBeLessThanOrEqual(OUTBOX_TTL);
  });

  it('delivers a reply over the channel limit split, in order and complete', async () => {
    sys = await startSystem();
    const long = Array.from({ length: 12 }, (_, p) => Array.from({ length: 14 }, (_, w) => `p${p}w${w}`).join(' ')).join('\n\n');
    fake.script([{ text: long }]);
    const res = await post(message('tell me everything'));
    await runEnded(res.body.runId);

    await callbacksDrained();
    const texts = callbacks.texts(CONVERSATION);
    expect(texts.length).toBeGreaterThan(2);
    for (const t of texts) expect(t.length).toBeLessThanOrEqual(MAX_CHARS);
    expect(texts.join('\n\n')).toBe(long);
    expect(callbacks.accepted().map((c) => c.body.messageId)).toEqual(texts.map((_, i) => `${res.body.runId}:${res.body.seq}:${i}`));
  });

  it('answers an update posted three times once', async () => {
    sys = await startSystem();
    fake.script([{ text: 'Only once.' }]);
    const raw = message('are you there?');
    const answers = [await post(raw), await post(raw), await post(raw)];
    expect(answers.map((a) => a.status)).toEqual([202, 200, 200]);
    expect(answers.map((a) => a.body.result)).toEqual(['new-run', 'duplicate', 'duplicate']);

    await runEnded(answers[0]!.body.runId);
    await callbacksDrained();
    expect(callbacks.texts(CONVERSATION)).toEqual(['Only once.']);
    expect(fake.requests).toHaveLength(1);
    expect(await entries('message.received')).toHaveLength(1);
    expect(await entries('run.started')).toHaveLength(1);
  });

  it('rejects a bad signature, a stale timestamp and a malformed body with 401/401/400, leaving Redis unchanged', async () => {
    sys = await startSystem();
    fake.script([{ text: 'ok' }]);
    const first = await post(message('some history first'));
    await runEnded(first.body.runId);
    // The callback pump writes its lock and due set until the reply is taken: the snapshot starts once it is idle.
    await callbacksDrained();
    const lock = lockKey(sys.prefix, CONVERSATION);
    await waitFor(async () => (await sys.ctx.redis.exists(lock)) === 0 || undefined, 10_000, 'the callback lock released');
    // The console's activity index is written a moment after ingest, in a batch.
    await waitFor(async () => (await sys.ctx.redis.exists(`${sys.prefix}:console:recent`)) === 1 || undefined, 10_000, 'the activity noted');

    const snapshot = async () => {
      const keys = (await sys.ctx.redis.keys(`${sys.prefix}:*`)).sort();
      const dumps = await Promise.all(keys.map(async (k) => `${k} ${JSON.stringify(await sys.ctx.redis.dump(k))}`));
      return { keys: dumps.join('\n'), jobs: await sys.host.queue.queue.getJobCounts() };
    };
    const before = await snapshot();
    const raw = message('sneaky');
    const now = Math.floor(Date.now() / 1000);
    const results = [
      await post(raw, signedHeaders('not-the-secret-000000', raw)),
      await post(raw, signedHeaders(SECRET, raw, now - 3600)),
      await post('{"id": 1, "conversation": ', signedHeaders(SECRET, '{"id": 1, "conversation": ')),
    ];
    expect(results.map((r) => r.status)).toEqual([401, 401, 400]);
    for (const r of results) expect(r.body.error).toEqual(expect.any(String));
    expect(await snapshot()).toEqual(before);
  });

  it('/stop cuts off a running answer', async () => {
    sys = await startSystem();
    fake.script((_req, i) =>
      i === 0 ? { text: 'ALPHA BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima', delayMs: 60_000 } : { text: 'late' },
    );
    const first = await post(message('write a long story'));
    // The channel does not stream: the answer is asked whole, and held until the stop aborts the call.
    await fake.waitForRequests(1);

    const stop = await post(message('/stop'));
    expect(stop).toMatchObject({ status: 202, body: { result: 'command', command: 'stop' } });
    expect((await runEnded(first.body.runId)).outcome).toBe('stopped');
    await callbacksDrained();
    expect(callbacks.texts(CONVERSATION)).toEqual(['Stopping the current run.']);
    expect(fake.requests).toHaveLength(1);
  });

  it('/new starts a fresh context', async () => {
    sys = await startSystem();
    fake.script([{ text: 'Noted: your name is Ann.' }, { text: 'Hello!' }]);
    const first = await post(message('my name is Ann'));
    await runEnded(first.body.runId);

    const reset = await post(message('/new'));
    expect(reset).toMatchObject({ status: 202, body: { result: 'command', command: 'new' } });
    const second = await post(message('what is my name?'));
    await runEnded(second.body.runId);

    expect(userTexts(1)).toEqual(['what is my name?']);
    await callbacksDrained();
    expect(callbacks.texts(CONVERSATION)).toEqual(['Noted: your name is Ann.', expect.stringMatching(/^Started a new conversation/), 'Hello!']);
  });

  it('steers a message sent while the agent runs a tool into the same run', async () => {
    const slow = gatedTool();
    sys = await startSystem([slow.tool]);
    fake.script([{ toolCalls: [{ id: 'call_1', name: 'lookup', args: {} }] }, { text: 'Found it, and I will include the weekend.' }] satisfies FakeTurn[]);
    const first = await post(message('look up the schedule'));
    await slow.started;

    const second = await post(message('also the weekend please'));
    expect(second).toMatchObject({ status: 202, body: { result: 'steered', runId: first.body.runId } });
    slow.release('SCHEDULE');

    expect((await runEnded(first.body.runId)).outcome).toBe('completed');
    expect(fake.requests).toHaveLength(2);
    expect(userTexts(1)).toEqual(['look up the schedule', 'also the weekend please']);
    await callbacksDrained();
    expect(callbacks.texts(CONVERSATION)).toEqual(['Found it, and I will include the weekend.']);
    expect(new Set((await entries('run.started')).map((e) => e.run))).toEqual(new Set([first.body.runId]));
  });
});
