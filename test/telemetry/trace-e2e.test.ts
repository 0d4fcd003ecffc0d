/**
 * One message is one trace across processes: a webhook message through a
 * host-only process and a separate runner-only process (both `steerbot start`),
 * with one tool call and one steered message, exported over OTLP/HTTP to an
 * in-test receiver.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../src/http/signature.js';
import { freePort } from '../../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './otlp-receiver.js';
import { type SteerbotProcess, startSteerbotProcess } from './steerbot-process.js';

const SECRET = 'whsec-trace-e2e-0123456789abcdef';

/** A gate the `gate` tool waits on: the test opens it. */
async function startGate() {
  const waiting: ServerResponse[] = [];
  let arrived: () => void = () => undefined;
  const first = new Promise<void>((r) => (arrived = r));
  const server = createServer((_req, res) => {
    waiting.push(res);
    arrived();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/gate`,
    arrived: first,
    open: () => {
      for (const res of waiting.splice(0)) res.end('open');
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('tracing across a host and a runner process', () => {
  let receiver: OtlpReceiver;
  let model: FakeOpenAIServer;
  let gate: Awaited<ReturnType<typeof startGate>>;
  let host: SteerbotProcess;
  let runner: SteerbotProcess;
  let hostUrl: string;
  const prefix = testPrefix();
  let redis: Redis;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    model = await startFakeOpenAI();
    gate = await startGate();
    redis = new Redis(redisUrl());
    // Step 1 calls the gate tool; step 2 (after the tool and the steered message) answers.
    model.script([
      { toolCalls: [{ name: 'gate', args: {} }], usage: { prompt_tokens: 40, completion_tokens: 7 } },
      { text: 'All done.', usage: { prompt_tokens: 60, completion_tokens: 3 } },
    ]);
    const common = {
      REDIS_URL: redisUrl(),
      STEERBOT_PREFIX: prefix,
      STEERBOT_QUEUE_NAME: `runs-${prefix}`,
      STEERBOT_MODEL_PROVIDER: 'openai-compatible',
      OPENAI_BASE_URL: model.url,
      STEERBOT_MODEL: 'fake-model',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'fake-model' is not in the model catalogue
      STEERBOT_AGENT_CURRENT_TIME: 'false',
      STEERBOT_AGENT_STREAMING: 'false',
      STEERBOT_CONFIG: configFile,
      HOST: '127.0.0.1',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      GATE_URL: gate.url,
    };
    const hostPort = await freePort();
    [host, runner] = await Promise.all([
      startSteerbotProcess({ ...common, STEERBOT_RUNNER: 'false', PORT: String(hostPort), OTEL_SERVICE_NAME: 'steerbot-host' }),
      startSteerbotProcess({ ...common, STEERBOT_HOST: 'false', PORT: String(await freePort()), OTEL_SERVICE_NAME: 'steerbot-runner' }),
    ]);
    hostUrl = `http://127.0.0.1:${hostPort}`;
  }, 60_000);

  afterAll(async () => {
    gate?.open();
    await Promise.all([host?.stop(), runner?.stop()]);
    await Promise.all([receiver?.close(), model?.close(), gate?.close()]);
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  async function post(id: string, text: string) {
    const raw = JSON.stringify({ id, conversation: 'c1', sender: { id: 'ann', name: 'Ann' }, text });
    const res = await fetch(`${hostUrl}/webhooks/e2e`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
      body: raw,
    });
    return (await res.json()) as { result: string; runId: string; seq: number };
  }

  it('yields one trace: the request (carrying the ingest), and the run with its model, tool, steering and delivery spans', async () => {
    const first = await post('m1', 'What is behind the gate?');
    expect(first.result).toBe('new-run');
    await gate.arrived; // the tool call is running: the next message is steered into the run
    const second = await post('m2', 'And please be brief.');
    expect(second).toMatchObject({ result: 'steered', runId: first.runId });
    gate.open();

    const spans = receiver.spans;
    const run = await waitFor(() => spans.find((s) => s.name === 'run' && s.attributes['steerbot.run_id'] === first.runId), 30_000, 'the run span');
    await waitFor(() => spans.some((s) => s.name === 'delivery' && s.traceId === run.traceId) || undefined, 10_000, 'the delivery span');

    const inTrace = spans.filter((s) => s.traceId === run.traceId);
    const byId = new Map(inTrace.map((s) => [s.spanId, s]));
    const parentOf = (s: ReceivedSpan) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined);
    const children = (p: ReceivedSpan) => inTrace.filter((s) => s.parentSpanId === p.spanId);

    // Host: one span per request, the root, carrying the ingest; the run (another process) its child.
    const request = parentOf(run)!;
    expect(request).toMatchObject({
      name: 'POST /webhooks/e2e',
      parentSpanId: undefined,
      service: 'steerbot-host',
      attributes: {
        'http.route': '/webhooks/e2e',
        'http.response.status_code': 202,
        'steerbot.channel': 'webhook:e2e',
        'steerbot.conversation_id': 'webhook:e2e:c1',
        'steerbot.update_key': 'webhook:e2e:m1',
        'steerbot.dispatch.result': 'new-run',
        'steerbot.run_id': first.runId,
      },
    });
    expect(inTrace.filter((s) => s.service === 'steerbot-host')).toEqual([request]);

    // Runner: the run span and its children.
    expect(run.service).toBe('steerbot-runner');
    expect(run.attributes).toMatchObject({
      'steerbot.conversation_id': 'webhook:e2e:c1',
      'steerbot.attempt': 1,
      'steerbot.fencing_token': 1,
      'steerbot.run.outcome': 'completed',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 10,
    });
    const names = children(run)
      .map((s) => s.name)
      .sort();
    expect(names).toEqual(['delivery', 'model.call', 'model.call', 'steering.pull', 'tool.call']);
    const calls = children(run)
      .filter((s) => s.name === 'model.call')
      .sort((a, b) => a.startMs - b.startMs);
    expect(calls.map((c) => c.attributes)).toEqual([
      expect.objectContaining({
        'gen_ai.request.model': 'fake-model',
        'gen_ai.response.finish_reasons': ['tool-calls'],
        'gen_ai.usage.input_tokens': 40,
        'gen_ai.usage.output_tokens': 7,
        'steerbot.model.outcome': 'ok',
      }),
      expect.objectContaining({ 'gen_ai.response.finish_reasons': ['stop'], 'gen_ai.usage.input_tokens': 60, 'gen_ai.usage.output_tokens': 3 }),
    ]);
    expect(calls[0]!.attributes['steerbot.model.time_to_first_token_ms']).toEqual(expect.any(Number));
    const tool = children(run).find((s) => s.name === 'tool.call')!;
    expect(tool.attributes).toMatchObject({ 'gen_ai.tool.name': 'gate', 'steerbot.tool.outcome': 'ok' });
    expect(tool.attributes).not.toHaveProperty('steerbot.tool.arguments'); // payloads only when opted in
    const pull = children(run).find((s) => s.name === 'steering.pull')!;
    expect(pull.attributes).toMatchObject({ 'steerbot.steering.count': 1, 'steerbot.steering.seqs': [second.seq] });
    expect(pull.attributes['steerbot.steering.max_delay_ms']).toEqual(expect.any(Number));
    // Steering happens between the two model calls, after the tool.
    expect(pull.startMs).toBeGreaterThanOrEqual(tool.endMs);
    expect(calls[1]!.startMs).toBeGreaterThanOrEqual(pull.endMs);
    const delivery = children(run).find((s) => s.name === 'delivery')!;
    expect(delivery.attributes).toMatchObject({
      'steerbot.channel': 'webhook:e2e',
      'steerbot.delivery.outcome': 'sent',
      'steerbot.delivery.attempts': 1,
      'steerbot.delivery.rate_limit_retries': 0,
    });
    expect(delivery.attributes['steerbot.delivery_key']).toEqual(expect.stringContaining(first.runId));

    // The steered message has a trace of its own (its request, carrying the ingest), which the pull links to.
    const steeredIngest = await waitFor(
      () => spans.find((s) => s.name === 'POST /webhooks/e2e' && s.attributes['steerbot.update_key'] === 'webhook:e2e:m2'),
      10_000,
      'the steered request span',
    );
    expect(steeredIngest.traceId).not.toBe(run.traceId);
    expect(steeredIngest.attributes).toMatchObject({ 'steerbot.dispatch.result': 'steered', 'steerbot.run_id': first.runId });
    expect(pull.links).toEqual([expect.objectContaining({ traceId: steeredIngest.traceId, spanId: steeredIngest.spanId })]);

    // Log lines written inside the run carry its trace and a span of it; keys are unique per line (JSON.parse keeps the last).
    const runLines = runner.logs.filter((l) => l.runId === first.runId && l.msg !== 'run started');
    expect(runLines.length).toBeGreaterThan(0);
    for (const line of runLines) {
      expect(line.trace_id).toBe(run.traceId);
      expect(byId.has(line.span_id)).toBe(true);
    }
  }, 60_000);
});

const configFile = new URL('./fixtures/trace-e2e.config.json', import.meta.url).pathname;
