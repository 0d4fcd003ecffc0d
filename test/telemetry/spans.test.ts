/**
 * Spans and metrics made in-process, recorded by an SDK registered for this
 * file (an in-memory exporter): the ingest on the request's span (one span
 * per request), delivery retries after 429 and 5xx, the
 * compaction span and breaker counter, log lines carrying trace ids, and the
 * `OTEL_*` settings the composition reads.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { exportersFromEnv, samplerFromEnv } from '../../app/telemetry.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { IngestService } from '../../host/ingest.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { ChannelApiError, ConfigError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { bullPrefixFor, RunQueue } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { traceCompaction } from '../../src/telemetry/run-trace.js';
import { contextFromTraceparent, inSpan, requestContext, traceparentOf, tracer } from '../../src/telemetry/tracing.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor({ exporter })] });
let redis: Redis;

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  redis = new Redis(redisUrl());
});
afterEach(() => exporter.reset());
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
  await redis.quit();
});

const value = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
  const metric = metrics.registry.getSingleMetric(name);
  const got = (await metric?.get())?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return got?.value ?? 0;
};

describe('the ingest', () => {
  const prefix = testPrefix();
  let queue: RunQueue;
  let service: IngestService;
  beforeAll(() => {
    queue = new RunQueue({ connection: redis, name: `runs-${prefix}`, bullPrefix: bullPrefixFor(prefix) });
    service = new IngestService(new Dispatch({ client: redis, prefix }), queue);
  });
  afterAll(async () => {
    await queue.queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await cleanupPrefix(redis, prefix);
  });
  const message = (id: string) => ({ conversationId: `webhook:t:${id}`, updateKey: `webhook:t:${id}`, sender: { id: 'u1' }, text: 'hi' });
  /** The record entry's trace context of the conversation's first message. */
  const recordedTrace = async (id: string) => {
    const [entry] = await readRange(redis, conversationKeys(prefix, `webhook:t:${id}`).log, { count: 1 });
    return (entry as { trace?: string }).trace;
  };

  it("is recorded on the request's span, one span per request, whose context the record entry carries", async () => {
    const request = tracer().startSpan('POST /webhooks/t');
    const result = await context.with(requestContext(context.active(), request), () => service.ingest(message('a'), { channel: 'webhook:t' }));
    const expected = traceparentOf(request);
    request.end();
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['POST /webhooks/t']);
    expect(spans[0]!.attributes).toMatchObject({
      'steerbot.channel': 'webhook:t',
      'steerbot.conversation_id': 'webhook:t:a',
      'steerbot.update_key': 'webhook:t:a',
      'steerbot.dispatch.result': 'new-run',
      'steerbot.run_id': (result as { runId: string }).runId,
    });
    expect(await recordedTrace('a')).toBe(expected);
  });

  it('has a span of its own outside a request (polling, a gateway)', async () => {
    await service.ingest(message('b'), { channel: 'webhook:t' });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['ingest']);
    expect(spans[0]!.attributes).toMatchObject({ 'steerbot.update_key': 'webhook:t:b', 'steerbot.dispatch.result': 'new-run' });
    expect(await recordedTrace('b')).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });

  it('makes no span and writes no trace context for a request that is not sampled', async () => {
    const unsampled = trace.wrapSpanContext({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 0 });
    await context.with(requestContext(context.active(), unsampled), () => service.ingest(message('c'), { channel: 'webhook:t' }));
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(await recordedTrace('c')).toBeUndefined();
  });
});

describe("a webhook route's span", () => {
  const prefix = testPrefix();
  let queue: RunQueue;
  let http: HttpServer;
  beforeAll(async () => {
    queue = new RunQueue({ connection: redis, name: `runs-${prefix}`, bullPrefix: bullPrefixFor(prefix) });
    const service = new IngestService(new Dispatch({ client: redis, prefix }), queue);
    http = createHttpServer({
      config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 4096, requestTimeoutMs: 60_000 } },
      redis,
      logger: createLogger({ level: 'silent' }),
    });
    routeRegistry(http).add({
      method: 'POST',
      path: '/webhooks/t',
      // Every caller of this route is trusted with its trace (test/security/trace-context.test.ts attacks the rule).
      trustsCallerTrace: () => true,
      async handle(req) {
        const id = req.body.toString();
        const r = await service.ingest(
          { conversationId: `webhook:t:${id}`, updateKey: `webhook:t:${id}`, sender: { id: 'u1' }, text: 'hi' },
          { channel: 'webhook:t' },
        );
        return { status: 202, json: { result: r.kind } };
      },
    });
    await http.ready();
  });
  afterAll(async () => {
    await http.close();
    await queue.queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await cleanupPrefix(redis, prefix);
  });
  const post = (id: string, traceparent?: string) =>
    http.inject({ method: 'POST', url: '/webhooks/t', payload: id, headers: { 'content-type': 'text/plain', ...(traceparent && { traceparent }) } });
  const recordedTrace = async (id: string) => {
    const [entry] = await readRange(redis, conversationKeys(prefix, `webhook:t:${id}`).log, { count: 1 });
    return (entry as { trace?: string }).trace;
  };

  it("is one span carrying the route, the ingest and the status, continuing the caller's trace", async () => {
    const caller = `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`;
    expect((await post('r1', caller)).statusCode).toBe(202);
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['POST /webhooks/t']);
    const [span] = spans;
    expect(span!.spanContext().traceId).toBe('c'.repeat(32));
    expect(span!.attributes).toMatchObject({
      'http.route': '/webhooks/t',
      'http.response.status_code': 202,
      'steerbot.conversation_id': 'webhook:t:r1',
      'steerbot.dispatch.result': 'new-run',
    });
    expect(await recordedTrace('r1')).toBe(`00-${'c'.repeat(32)}-${span!.spanContext().spanId}-01`);
  });

  it('makes no span, of the request or of its ingest, and writes no trace context when the request is not sampled', async () => {
    const sampler = new ParentBasedSampler({ root: new AlwaysOnSampler() });
    const unsampledProvider = new TracerProvider({ sampler, spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    trace.disable();
    trace.setGlobalTracerProvider(unsampledProvider);
    try {
      expect((await post('r2', `00-${'c'.repeat(32)}-${'d'.repeat(16)}-00`)).statusCode).toBe(202);
    } finally {
      trace.disable();
      trace.setGlobalTracerProvider(provider);
    }
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(await recordedTrace('r2')).toBeUndefined();
  });
});

describe('the delivery span', () => {
  const prefix = testPrefix();
  afterAll(() => cleanupPrefix(redis, prefix));

  it('counts attempts and retries after 429, and the wait, and logs the delivery attempt under its own key', async () => {
    const failures: Error[] = [
      new ChannelApiError('slow down', { status: 429, retryAfterMs: 20 }),
      new ChannelApiError('slow down', { status: 429, retryAfterMs: 30 }),
      new ChannelApiError('bad gateway', { status: 502 }),
    ];
    const out: ChannelOutbound = {
      channelId: 'fake',
      maxMessageChars: 1000,
      async send() {
        const failure = failures.shift();
        if (failure) throw failure;
        return { messageId: 'm1' };
      },
    };
    const lines: string[] = [];
    const logger = createLogger({ level: 'warn', destination: { write: (s: string) => void lines.push(s) } }).child({ attempt: 1 });
    const before = {
      rate: await value('steerbot_delivery_retries_total', { channel: 'fake', reason: 'rate_limit' }),
      server: await value('steerbot_delivery_retries_total', { channel: 'fake', reason: 'server_error' }),
      wait: await value('steerbot_delivery_rate_limit_wait_seconds_total', { channel: 'fake' }),
      sent: await value('steerbot_deliveries_total', { channel: 'fake', outcome: 'sent' }),
    };
    const sink = new RunDelivery({
      client: redis,
      prefix,
      conversationId: 'fake:1',
      runId: 'run1',
      resolve: () => out,
      logger,
      sleep: async () => undefined,
      retryBaseMs: 1,
    });

    await inSpan('run', {}, () => sink.message('hello'));

    const spans = exporter.getFinishedSpans();
    const run = spans.find((s) => s.name === 'run')!;
    const delivery = spans.find((s) => s.name === 'delivery')!;
    expect(delivery.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(delivery.attributes).toMatchObject({
      'steerbot.channel': 'fake',
      'steerbot.delivery_key': 'run1:0',
      'steerbot.delivery.attempts': 4,
      'steerbot.delivery.rate_limit_retries': 2,
      'steerbot.delivery.outcome': 'sent',
    });
    expect(delivery.events.map((e) => e.attributes?.['steerbot.delivery.rate_limited'])).toEqual([true, true, false]);
    expect(await value('steerbot_delivery_retries_total', { channel: 'fake', reason: 'rate_limit' })).toBe(before.rate + 2);
    expect(await value('steerbot_delivery_retries_total', { channel: 'fake', reason: 'server_error' })).toBe(before.server + 1);
    expect(await value('steerbot_delivery_rate_limit_wait_seconds_total', { channel: 'fake' })).toBeCloseTo(before.wait + 0.05, 6);
    expect(await value('steerbot_deliveries_total', { channel: 'fake', outcome: 'sent' })).toBe(before.sent + 1);

    // One key per line: the run's `attempt` and the retry's `deliveryAttempt` no longer collide.
    const retries = lines.filter((l) => l.includes('channel call failed; retrying'));
    expect(retries).toHaveLength(3);
    for (const line of retries) {
      expect(line.match(/"attempt":/g)).toHaveLength(1);
      expect(JSON.parse(line)).toMatchObject({
        attempt: 1,
        deliveryAttempt: expect.any(Number),
        trace_id: delivery.spanContext().traceId,
        span_id: delivery.spanContext().spanId,
      });
    }
  });
});

describe('the compaction span', () => {
  it('records trigger, outcome, tokens and summarizer under the active run, and counts a breaker that opened', async () => {
    const before = {
      opened: await value('steerbot_compaction_breaker_opened_total'),
      n: await value('steerbot_compactions_total', { trigger: 'pressure', outcome: 'ineffective' }),
    };
    const startedAt = Date.now() - 40;
    await inSpan('run', {}, async () =>
      traceCompaction('pressure', startedAt, {
        outcome: 'ineffective',
        tokensBefore: 9000,
        tokensAfter: 8800,
        summarizer: 'llm',
        breakerOpen: true,
        breakerOpened: true,
      }),
    );
    const spans = exporter.getFinishedSpans();
    const compaction = spans.find((s) => s.name === 'compaction')!;
    expect(compaction.parentSpanContext?.spanId).toBe(spans.find((s) => s.name === 'run')!.spanContext().spanId);
    expect(compaction.attributes).toEqual({
      'steerbot.compaction.trigger': 'pressure',
      'steerbot.compaction.outcome': 'ineffective',
      'steerbot.compaction.tokens_before': 9000,
      'steerbot.compaction.tokens_after': 8800,
      'steerbot.compaction.summarizer': 'llm',
      'steerbot.compaction.breaker_open': true,
    });
    expect(compaction.duration[0] * 1000 + compaction.duration[1] / 1e6).toBeGreaterThanOrEqual(40);
    expect(await value('steerbot_compaction_breaker_opened_total')).toBe(before.opened + 1);
    expect(await value('steerbot_compactions_total', { trigger: 'pressure', outcome: 'ineffective' })).toBe(before.n + 1);
  });
});

describe('trace context', () => {
  it('round-trips through a traceparent: a span started from it continues the trace', () => {
    const parent = tracer().startSpan('ingest');
    const tp = traceparentOf(parent)!;
    expect(tp).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const child = tracer().startSpan('run', {}, contextFromTraceparent(tp));
    expect(child.spanContext().traceId).toBe(parent.spanContext().traceId);
    child.end();
    parent.end();
    expect(exporter.getFinishedSpans().find((s) => s.name === 'run')!.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
  });

  it('ignores a malformed traceparent (a new trace starts)', () => {
    const span = tracer().startSpan('run', {}, contextFromTraceparent('00-zz-11-01'));
    expect(span.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    span.end();
    expect(exporter.getFinishedSpans()[0]!.parentSpanContext).toBeUndefined();
  });

  it('puts trace_id and span_id on log lines inside a span, and none outside', async () => {
    const lines: string[] = [];
    const logger = createLogger({ destination: { write: (s: string) => void lines.push(s) } });
    logger.info('outside');
    await inSpan('request', {}, async (span) => {
      logger.child({ part: 'x' }).info('inside');
      expect(JSON.parse(lines[1]!)).toMatchObject({ trace_id: span.spanContext().traceId, span_id: span.spanContext().spanId });
    });
    expect(JSON.parse(lines[0]!)).not.toHaveProperty('trace_id');
  });
});

describe('the OTEL_* settings', () => {
  it('turns tracing on with an OTLP endpoint or exporter, off with none or OTEL_SDK_DISABLED', () => {
    expect(exportersFromEnv({})).toEqual([]);
    expect(exportersFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual(['otlp']);
    expect(exportersFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).toEqual(['otlp']);
    expect(exportersFromEnv({ OTEL_TRACES_EXPORTER: 'otlp, console' })).toEqual(['otlp', 'console']);
    expect(exportersFromEnv({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toEqual([]);
    expect(exportersFromEnv({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' })).toEqual([]);
    expect(() => exportersFromEnv({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(ConfigError);
  });

  it('reads the sampler and its ratio, refusing unknown ones', () => {
    expect(samplerFromEnv({})).toBeInstanceOf(ParentBasedSampler);
    expect(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'always_off' })).toBeInstanceOf(AlwaysOffSampler);
    expect(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })).toBeInstanceOf(TraceIdRatioBasedSampler);
    expect(String(samplerFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }))).toContain('0.25');
    expect(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(/OTEL_TRACES_SAMPLER_ARG/);
    expect(() => samplerFromEnv({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/unknown sampler sometimes/);
  });
});
