/**
 * `/metrics` scraped before and after a scripted conversation (one process,
 * host and runner, a webhook channel, the local agent on the fake model):
 * every counter moved by exactly what happened, nothing else moved.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.js';
import { type RunningApp, startApp } from '../../app/start.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { signedHeaders } from '../../src/http/signature.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../../src/redis/local.js';
import { metricNames } from '../../src/telemetry/metrics.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { parseExposition, type Samples } from './exposition.js';

const SECRET = 'whsec-metrics-0123456789abcdef';

/** Counter series (and histogram `_count`s) that differ between two scrapes, with their deltas. */
function moved(before: Samples, after: Samples): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of after) {
    const name = key.split('{')[0]!;
    const counted = name.endsWith('_total') || name.endsWith('_count');
    if (!counted || !name.startsWith('steerbot_')) continue;
    const delta = value - (before.get(key) ?? 0);
    if (delta !== 0) out[key] = delta;
  }
  return out;
}

describe('GET /metrics', () => {
  let app: RunningApp;
  let model: FakeOpenAIServer;
  const prefix = testPrefix();

  beforeAll(async () => {
    model = await startFakeOpenAI();
    const config = await loadConfig({
      env: {
        REDIS_URL: redisUrl(),
        STEERBOT_PREFIX: prefix,
        STEERBOT_QUEUE_NAME: `runs-${prefix}`,
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        LOG_LEVEL: 'silent',
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: model.url,
        STEERBOT_MODEL: 'fake-model',
        STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'fake-model' is not in the model catalogue
        STEERBOT_AGENT_STREAMING: 'false',
        STEERBOT_MAX_MESSAGE_CHARS: '100',
      },
    });
    app = await startApp({
      config: { ...config, channels: { ...config.channels, webhooks: { e2e: webhookChannelConfigSchema.parse({ secret: SECRET }) } } },
      logger: createLogger({ level: 'silent' }),
    });
  }, 30_000);

  afterAll(async () => {
    if (app) await cleanupPrefix(app.ctx.redis, prefix);
    await app?.stop();
    await model?.close();
  });

  const scrape = async () => {
    const res = await fetch(`${app.address}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    return parseExposition(await res.text());
  };
  const post = async (body: Record<string, unknown>) => {
    const raw = JSON.stringify({ conversation: 'c1', sender: { id: 'ann' }, ...body });
    const res = await fetch(`${app.address}/webhooks/e2e`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
      body: raw,
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it('lists every steerbot metric', async () => {
    const text = await (await fetch(`${app.address}/metrics`)).text();
    const declared = new Set([...text.matchAll(/^# TYPE (steerbot_\w+) /gm)].map((m) => m[1]));
    expect([...declared].sort()).toEqual([...metricNames()].sort());
    // Process metrics too.
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
  });

  it('moves each counter by exactly what a scripted conversation did', async () => {
    model.script([
      { toolCalls: [{ name: 'current_time', args: {} }], usage: { prompt_tokens: 30, completion_tokens: 5 } },
      { text: 'It is now.', usage: { prompt_tokens: 50, completion_tokens: 4 } },
    ]);
    const before = await scrape();

    const first = await post({ id: 'm1', text: 'What time is it?' });
    expect(first).toMatchObject({ status: 202, body: { result: 'new-run' } });
    expect((await post({ id: 'm1', text: 'What time is it?' })).body.result).toBe('duplicate');
    expect((await post({ id: 'm2', text: 'x'.repeat(200) })).status).toBe(400); // over dispatch.maxMessageChars: rejected by ingest
    const key = `${prefix}:{c:webhook:e2e:c1}:active`;
    await waitFor(async () => (await app.ctx.redis.exists(key)) === 0 || undefined, 15_000, 'the run ended');
    await waitFor(
      async () =>
        (await scrape()).get('steerbot_deliveries_total{channel="webhook:e2e",outcome="sent"}') ===
          (before.get('steerbot_deliveries_total{channel="webhook:e2e",outcome="sent"}') ?? 0) + 1 || undefined,
      5000,
      'the delivery counted',
    );

    const after = await scrape();
    const m = 'model="fake-model"';
    expect(moved(before, after)).toEqual({
      'steerbot_updates_ingested_total{channel="webhook:e2e",reason="",result="new-run"}': 1,
      'steerbot_updates_ingested_total{channel="webhook:e2e",reason="",result="duplicate"}': 1,
      'steerbot_updates_ingested_total{channel="webhook:e2e",reason="bad-input",result="rejected"}': 1,
      'steerbot_http_requests_total{method="POST",route="/webhooks/e2e",status="202"}': 1,
      'steerbot_http_requests_total{method="POST",route="/webhooks/e2e",status="200"}': 1,
      'steerbot_http_requests_total{method="POST",route="/webhooks/e2e",status="400"}': 1,
      'steerbot_http_request_duration_seconds_count{method="POST",route="/webhooks/e2e"}': 3,
      // The scrapes before this one (the first, and the polls of the delivery wait).
      'steerbot_http_requests_total{method="GET",route="/metrics",status="200"}': expect.any(Number),
      'steerbot_http_request_duration_seconds_count{method="GET",route="/metrics"}': expect.any(Number),
      'steerbot_runs_started_total{takeover="0"}': 1,
      'steerbot_runs_ended_total{outcome="completed"}': 1,
      'steerbot_run_duration_seconds_count{outcome="completed"}': 1,
      [`steerbot_model_call_duration_seconds_count{${m},outcome="ok"}`]: 2,
      [`steerbot_model_time_to_first_token_seconds_count{${m}}`]: 2,
      [`steerbot_model_tokens_total{kind="input",${m}}`]: 80,
      [`steerbot_model_tokens_total{kind="output",${m}}`]: 9,
      'steerbot_tool_calls_total{outcome="ok",tool="current_time"}': 1,
      'steerbot_tool_call_duration_seconds_count{tool="current_time"}': 1,
      'steerbot_deliveries_total{channel="webhook:e2e",outcome="sent"}': 1,
    });
    expect(after.get('steerbot_runs_active')).toBe(0);
    // The queue gauges are read at scrape time; the run's job has completed.
    expect(after.get(`steerbot_queue_jobs{queue="runs-${prefix}",state="waiting"}`)).toBe(0);
    expect(after.get(`steerbot_queue_jobs{queue="runs-${prefix}",state="active"}`)).toBe(0);
  }, 30_000);

  it('counts a steered message and its depth, and the pull that injects it', async () => {
    // The first step waits until the second message is steered in (the model answers late).
    model.script([{ toolCalls: [{ name: 'current_time', args: {} }], delayMs: 1500 }, { text: 'Done.' }]);
    const before = await scrape();
    const first = await post({ id: 's1', conversation: 'c2', text: 'Start.' });
    await model.waitForRequests(model.requests.length + 1);
    const second = await post({ id: 's2', conversation: 'c2', text: 'Also this.' });
    expect(second.body).toMatchObject({ result: 'steered', runId: first.body.runId });
    await waitFor(async () => (await app.ctx.redis.exists(`${prefix}:{c:webhook:e2e:c2}:active`)) === 0 || undefined, 15_000, 'the run ended');
    const after = await scrape();
    const delta = moved(before, after);
    expect(delta['steerbot_updates_ingested_total{channel="webhook:e2e",reason="",result="steered"}']).toBe(1);
    expect(delta.steerbot_steering_injected_total).toBe(1);
    expect(delta.steerbot_steering_delay_seconds_count).toBe(1);
    expect(delta.steerbot_steering_depth_count).toBe(1);
    // Depth 1 right after the steer: in the first bucket.
    expect((after.get('steerbot_steering_depth_bucket{le="1"}') ?? 0) - (before.get('steerbot_steering_depth_bucket{le="1"}') ?? 0)).toBe(1);
  }, 30_000);
});
