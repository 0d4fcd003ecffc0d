/**
 * JSON nested past the one limit (`MAX_JSON_DEPTH`, src/json.ts), sent the
 * ways it reaches steerbot from outside: an external agent's event (a
 * scripted http-agent server), a webhook delivery with a valid signature,
 * the send-and-wake API with a token, through a steerbot started from a
 * config file; and a model's tool call, through the real model factory and
 * the local agent. Past the limit is a clear error and nothing of it is
 * written; nesting up to the limit goes through.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { NOTICES } from '../../plugins/http-agent/failure.js';
import { STATE_KEY } from '../../plugins/http-agent/invocation.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createModel } from '../../runner/model.js';
import { signedHeaders } from '../../src/http/signature.js';
import { MAX_JSON_DEPTH } from '../../src/json.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { ConversationState } from '../../src/protocol/state.js';
import type { RecordEntry, SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { SECRET as AGENT_SECRET, type ScriptedAgent, startScriptedAgent } from '../http-agent/helpers.js';

const WEBHOOK_SECRET = 'whsec-nested-0123456789abcdef';
const API_TOKEN = 'nested-api-token-0123456789abcdef';
const TOO_DEEP = `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;

/** `depth` arrays, one inside the other. */
const arrays = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
/** `depth` objects `{"a": …}`, one inside the other. */
const objects = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** A `state` event line whose value is `value` (the event's object is one level more). */
const stateLine = (value: string) => `{"type":"state","key":"k","value":${value}}`;
/** A `step` event line with one tool call whose input is `input` (five levels more). */
const stepLine = (input: string) =>
  `{"type":"step","messages":[{"role":"assistant","content":[{"type":"tool-call","toolCallId":"c1","toolName":"lookup","input":${input}}]}]}`;

/** What the scripted agent writes for a user message, by its text; any other text is answered plainly. */
const DEEP_EVENTS: Record<string, string> = {
  'deep state': stateLine(arrays(100_000)),
  'deep step': stepLine(objects(100_000)),
  'one level too deep': stateLine(arrays(MAX_JSON_DEPTH)),
};
const AT_THE_LIMIT = 'nested as deep as allowed';

interface World {
  app: RunningApp;
  prefix: string;
  agent: ScriptedAgent;
  callbacks: CallbackServer;
  dir: string;
}

/** steerbot from a config file: the http-agent runner, a signed webhook channel `e2e`, and an API token. */
async function startWorld(): Promise<World> {
  const agent = await startScriptedAgent((run, t) => {
    const text = run.inputs.at(-1)?.text ?? '';
    t.start();
    const deep = DEEP_EVENTS[text];
    if (deep !== undefined) {
      t.raw(`${deep}\n`);
      return;
    }
    if (text === AT_THE_LIMIT) {
      t.raw(`${stepLine(arrays(MAX_JSON_DEPTH - 5))}\n`);
      t.raw(`${stateLine(arrays(MAX_JSON_DEPTH - 1))}\n`);
    }
    t.send({ type: 'message', text: `answer to ${text}` });
    t.send({ type: 'result', outcome: 'completed' });
  });
  const callbacks = await startCallbackServer(WEBHOOK_SECRET);
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-nested-'));
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      http: { host: '127.0.0.1' },
      runner: { plugin: 'http-agent' },
      runs: { followUpsOnFailure: 0 },
      agents: { 'http-agent': { url: agent.url, secret: AGENT_SECRET } },
      channels: { webhooks: { e2e: { secret: WEBHOOK_SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 } } },
      host: { api: { tokens: [{ name: 'ops', token: API_TOKEN, scopes: ['events', 'send', 'open'] }] } },
    }),
  );
  const prefix = testPrefix();
  const env = { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `runs-${prefix}`, LOG_LEVEL: 'silent' };
  const config = await loadConfig({ file, env });
  const app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger: createLogger({ level: 'silent' }) });
  return { app, prefix, agent, callbacks, dir };
}

/** POSTs `raw` to the webhook channel, signed. */
async function postWebhook(w: World, raw: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${w.app.address}/webhooks/e2e`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) },
    body: raw,
  });
  return { status: res.status, body: await res.json() };
}

/** A webhook message body (as JSON text) whose `metadata` is `{ "x": <value> }`, two levels above `value`. */
const webhookBody = (id: string, conversation: string, text: string, value = '1') =>
  `{"id":"${id}","conversation":"${conversation}","sender":{"id":"ann","name":"Ann"},"text":"${text}","metadata":{"x":${value}}}`;

/** POSTs `raw` to the API's `route` of `conversation` with the token. */
async function postApi(w: World, conversation: string, route: 'events' | 'messages', raw: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${w.app.address}/api/conversations/${encodeURIComponent(conversation)}/${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json', ...headers },
    body: raw,
  });
  return { status: res.status, body: (await res.json()) as any };
}

const recordOf = (w: World, cid: string): Promise<SeqEntry[]> => readRange(w.app.ctx.redis, conversationKeys(w.prefix, cid).log);
const entriesOf = async <K extends RecordEntry['kind']>(w: World, cid: string, kind: K) =>
  (await recordOf(w, cid)).filter((e) => e.kind === kind) as Array<SeqEntry<Extract<RecordEntry, { kind: K }>>>;
/** Every key of the test's prefix (runs' queue included) that names `conversation`. */
const keysNaming = async (w: World, conversation: string) =>
  [...(await w.app.ctx.redis.keys(`${w.prefix}:*`)), ...(await w.app.ctx.redis.keys(`${bullPrefixFor(w.prefix)}:*`))].filter((k) => k.includes(conversation));
const runEnded = (w: World, cid: string, runId: string) =>
  waitFor(async () => (await entriesOf(w, cid, 'run.ended')).find((e) => e.run === runId), 10_000, `run.ended of ${runId}`);

describe('JSON nested past the limit', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
  }, 30_000);
  afterAll(async () => {
    await cleanupPrefix(w.app.ctx.redis, w.prefix);
    await cleanupPrefix(w.app.ctx.redis, bullPrefixFor(w.prefix));
    await w.app.stop();
    await Promise.all([w.agent.close(), w.callbacks.close()]);
    rmSync(w.dir, { recursive: true, force: true });
  });

  it('from an external agent fails the run with a recorded malformed-event error and the usual answer, writing nothing of the event', async () => {
    for (const [i, text] of Object.keys(DEEP_EVENTS).entries()) {
      const conversation = `agent-${i}`;
      const cid = `webhook:e2e:${conversation}`;
      const posted = await postWebhook(w, webhookBody(`a${i}`, conversation, text));
      expect(posted, text).toMatchObject({ status: 202, body: { result: 'new-run' } });
      const ended = await runEnded(w, cid, posted.body.runId);
      expect({ outcome: ended.outcome, reason: ended.reason }, text).toEqual({
        outcome: 'failed',
        reason: `http-agent malformed-event: an event is ${TOO_DEEP}`,
      });
      const told = await waitFor(() => (w.callbacks.texts(conversation).length > 0 ? w.callbacks.texts(conversation) : undefined), 10_000, 'the answer');
      expect(told, text).toEqual([
        `${NOTICES.badInput}\n\nThe run failed before answering this message: “${text}”. Please send again what still needs an answer.`,
      ]);
      expect(await entriesOf(w, cid, 'model.step'), text).toEqual([]);
      expect(await new ConversationState({ client: w.app.ctx.redis, prefix: w.prefix }).get(cid, STATE_KEY), text).toBeUndefined();
    }
  });

  it('in a signed webhook delivery is refused 400 naming the nesting, writing nothing', async () => {
    const cases = [
      ['one level too deep', arrays(MAX_JSON_DEPTH - 1)],
      ['100 000 arrays', arrays(100_000)],
      // As many as fit the channel's default body limit (256 KiB).
      ['40 000 objects', objects(40_000)],
    ];
    for (const [i, [what, value]] of cases.entries()) {
      const conversation = `hook-${i}`;
      expect(await postWebhook(w, webhookBody(`h${i}`, conversation, 'hello', value)), what).toEqual({ status: 400, body: { error: `body is ${TOO_DEEP}` } });
      expect(await keysNaming(w, conversation), what).toEqual([]);
    }
    expect(w.callbacks.requests.filter((r) => r.body.conversation.startsWith('hook-'))).toEqual([]);
  });

  it('in a send-and-wake API body is refused 400 naming the nesting, writing and sending nothing', async () => {
    const event = (id: string, value: string) => `{"source":"ci","id":"${id}","text":"build done","data":{"x":${value}}}`;
    const cases: Array<[string, string, 'events' | 'messages', string]> = [
      ['event one level too deep', 'api-0', 'events', event('e0', arrays(MAX_JSON_DEPTH - 1))],
      ['event 100 000 deep', 'api-1', 'events', event('e1', objects(100_000))],
      ['message 100 000 deep', 'api-2', 'messages', `{"text":"hi","buttons":${arrays(100_000)}}`],
    ];
    for (const [what, conversation, route, raw] of cases) {
      const got = await postApi(w, `webhook:e2e:${conversation}`, route, raw, { 'idempotency-key': `k-${conversation}` });
      expect(got, what).toEqual({ status: 400, body: { error: `body is ${TOO_DEEP}` } });
      expect(await keysNaming(w, conversation), what).toEqual([]);
    }
    expect(w.callbacks.requests.filter((r) => r.body.conversation.startsWith('api-'))).toEqual([]);
  });

  it('takes JSON nested as deep as the limit: an agent’s events, a webhook delivery and an API event are applied and recorded', async () => {
    const conversation = 'at-the-limit';
    const cid = `webhook:e2e:${conversation}`;
    const posted = await postWebhook(w, webhookBody('l1', conversation, AT_THE_LIMIT, arrays(MAX_JSON_DEPTH - 2)));
    expect(posted).toMatchObject({ status: 202, body: { result: 'new-run' } });
    expect((await runEnded(w, cid, posted.body.runId)).outcome).toBe('completed');
    const [received] = await entriesOf(w, cid, 'message.received');
    expect(received!.metadata).toEqual({ x: JSON.parse(arrays(MAX_JSON_DEPTH - 2)) });
    const steps = await entriesOf(w, cid, 'model.step');
    expect(steps.map((s) => s.messages)).toEqual([
      [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: JSON.parse(arrays(MAX_JSON_DEPTH - 5)) }] }],
      [{ role: 'assistant', content: [{ type: 'text', text: `answer to ${AT_THE_LIMIT}` }] }],
    ]);
    expect(await new ConversationState({ client: w.app.ctx.redis, prefix: w.prefix }).get(cid, STATE_KEY)).toEqual({
      k: JSON.parse(arrays(MAX_JSON_DEPTH - 1)),
    });

    const event = await postApi(w, cid, 'events', `{"source":"ci","id":"e-limit","text":"build done","data":{"x":${objects(MAX_JSON_DEPTH - 2)}}}`);
    expect(event).toMatchObject({ status: 202 });
    const recorded = await waitFor(async () => (await entriesOf(w, cid, 'message.received')).find((e) => e.origin?.id === 'e-limit'), 5000, 'the event');
    expect(recorded.origin?.data).toEqual({ x: JSON.parse(objects(MAX_JSON_DEPTH - 2)) });
    await waitFor(() => w.callbacks.texts(conversation).length === 2 || undefined, 10_000, 'both answers');
    expect(w.callbacks.texts(conversation)).toEqual([`answer to ${AT_THE_LIMIT}`, 'answer to build done']);
  });
});

describe('a model tool call nested past the limit', () => {
  it('is refused to the model as invalid input through the model factory, and the run goes on to answer', async () => {
    const fake = await startFakeOpenAI();
    const model = createModel({
      provider: 'openai-compatible',
      name: 'fake-model',
      baseURL: fake.url,
      apiKey: 'k',
      contextWindow: 100_000,
      outputReserve: 4000,
    });
    const h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model }) });
    try {
      // A tool whose input the model wrote 100 000 arrays deep, then (told why) an answer.
      fake.script([{ toolCalls: [{ name: 'current_time', args: `{"timeZone":${arrays(100_000)}}` }] }, { text: 'It is noon.' }]);
      const started = await h.ingest('what time is it?');
      expect(started.kind).toBe('new-run');
      expect(await h.runEnded((started as { runId: string }).runId)).toMatchObject({ outcome: 'completed' });
      await h.idle();
      expect(h.outbound.texts).toEqual(['It is noon.']);

      const [call, answer] = (await h.entries('model.step')).map((s) => s.messages);
      expect(call).toEqual([
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: expect.any(String), toolName: 'current_time', input: {} }] },
        {
          role: 'tool',
          content: [
            {
              type: 'tool-result',
              toolCallId: expect.any(String),
              toolName: 'current_time',
              output: { type: 'error-text', value: expect.stringContaining(`the tool input is ${TOO_DEEP}`) },
            },
          ],
        },
      ]);
      expect(answer).toEqual([{ role: 'assistant', content: [{ type: 'text', text: 'It is noon.' }] }]);
      // The model was told why its call was refused.
      expect(JSON.stringify(fake.requests[1]!.body.messages)).toContain(`the tool input is ${TOO_DEEP}`);
    } finally {
      await h.close();
      await fake.close();
    }
  });
});
