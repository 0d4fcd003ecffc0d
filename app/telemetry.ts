/**
 * Starts the OpenTelemetry tracing SDK when the standard `OTEL_*` settings
 * ask for it; the code everywhere else uses `@opentelemetry/api` only, whose
 * no-op costs nothing while tracing is off.
 *
 * On when `OTEL_TRACES_EXPORTER` names `otlp` or `console`, or (unset) when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
 * off when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. Spans go
 * to an OTLP/HTTP endpoint (JSON, the exporter reads the endpoint, headers,
 * timeout and compression variables itself), sampled by `OTEL_TRACES_SAMPLER`
 * / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`), batched by
 * `OTEL_BSP_*`. `OTEL_SERVICE_NAME` (default `steerbot`) and
 * `OTEL_RESOURCE_ATTRIBUTES` name the process. `STEERBOT_TRACE_TOOL_PAYLOADS=true`
 * puts tool arguments and results (redacted, truncated) on `tool.call` spans.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { ConfigError } from '../src/errors.js';
import type { Logger } from '../src/logger.js';
import { captureToolPayloads } from '../src/telemetry/agent-spans.js';

/** Tracing as started for this process. */
export interface Tracing {
  /** Whether spans are recorded and exported. */
  active: boolean;
  /** Exports what is buffered and stops (the last user of a shared SDK stops it). Never throws. */
  shutdown(): Promise<void>;
}

type Env = Record<string, string | undefined>;

const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

/** The sampler `OTEL_TRACES_SAMPLER` names. Throws ConfigError on an unknown one or a bad ratio. */
export function samplerFromEnv(env: Env): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const ratio = () => {
    const raw = env.OTEL_TRACES_SAMPLER_ARG;
    if (raw === undefined || raw.trim() === '') return 1;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0 || n > 1)
      throw new ConfigError([{ path: 'env OTEL_TRACES_SAMPLER_ARG', message: `expected a ratio between 0 and 1, got ${raw}` }]);
    return n;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      throw new ConfigError([{ path: 'env OTEL_TRACES_SAMPLER', message: `unknown sampler ${name}; expected one of ${SAMPLERS.join(', ')}` }]);
  }
}

/** The exporters the environment asks for ([] = tracing off). Throws ConfigError on an unknown one. */
export function exportersFromEnv(env: Env): Array<'otlp' | 'console'> {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return [];
  const list = env.OTEL_TRACES_EXPORTER?.split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  if (list === undefined || list.length === 0) return env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ? ['otlp'] : [];
  if (list.includes('none')) return [];
  for (const e of list) {
    if (e !== 'otlp' && e !== 'console')
      throw new ConfigError([{ path: 'env OTEL_TRACES_EXPORTER', message: `unsupported exporter ${e}; expected otlp, console or none` }]);
  }
  return [...new Set(list)] as Array<'otlp' | 'console'>;
}

const intFromEnv = (env: Env, name: string): number | undefined => {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError([{ path: `env ${name}`, message: `expected a non-negative integer, got ${raw}` }]);
  return n;
};

/** Whether AsyncLocalStorage runs on AsyncContextFrame (cheap) rather than async_hooks: Node 24+, or the flag on Node 22. */
function asyncContextFrame(): boolean {
  const flags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  if (flags.includes('--no-async-context-frame')) return false;
  return Number(process.versions.node.split('.')[0]) >= 24 || flags.includes('--experimental-async-context-frame');
}

/** The exporter's URL from `env` (the exporter itself reads `process.env` only; `env` may be another). */
function otlpUrl(env: Env): { url?: string } {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return { url: traces };
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? { url: `${base.replace(/\/+$/, '')}/v1/traces` } : {};
}

// One SDK per process, shared by every `startApp` in it (tests start several); the last stop shuts it down.
let shared: { provider: TracerProvider; users: number } | undefined;

/**
 * Starts tracing from `env` (default `process.env`), or reuses the SDK an
 * earlier call in this process started. Off: nothing is registered.
 * @throws ConfigError on a bad `OTEL_*` value.
 */
export function startTracing(opts: { env?: Env; logger?: Logger } = {}): Tracing {
  const env = opts.env ?? process.env;
  captureToolPayloads((env.STEERBOT_TRACE_TOOL_PAYLOADS ?? '').trim().toLowerCase() === 'true');
  const exporters = exportersFromEnv(env);
  if (exporters.length === 0) return { active: false, shutdown: async () => undefined };
  if (!shared) {
    const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
    if (protocol !== undefined && protocol !== 'http/json')
      opts.logger?.warn({ protocol }, 'OTLP protocol not supported by this build; spans are sent as http/json');
    const batch = {
      scheduledDelayMillis: intFromEnv(env, 'OTEL_BSP_SCHEDULE_DELAY'),
      maxQueueSize: intFromEnv(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
      maxExportBatchSize: intFromEnv(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
      exportTimeoutMillis: intFromEnv(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
    };
    const processors: SpanProcessor[] = exporters.map((name) => {
      const exporter: SpanExporter = name === 'otlp' ? new OTLPTraceExporter(otlpUrl(env)) : new ConsoleSpanExporter();
      return new BatchSpanProcessor({ exporter, ...Object.fromEntries(Object.entries(batch).filter(([, v]) => v !== undefined)) });
    });
    const resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? 'steerbot' }))
      .merge(detectResources({ detectors: [envDetector] }));
    const provider = new TracerProvider({ sampler: samplerFromEnv(env), resource, spanProcessors: processors });
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    trace.setGlobalTracerProvider(provider);
    shared = { provider, users: 0 };
    opts.logger?.info({ exporters, sampler: env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on' }, 'tracing on');
    if (!asyncContextFrame()) {
      opts.logger?.warn(
        { node: process.version },
        'tracing keeps its context in AsyncLocalStorage, which on this Node taxes every promise; run with NODE_OPTIONS=--experimental-async-context-frame (the default from Node 24) to avoid it',
      );
    }
  }
  const mine = shared;
  mine.users++;
  let stopped = false;
  return {
    active: true,
    async shutdown() {
      if (stopped) return;
      stopped = true;
      if (--mine.users > 0) {
        await mine.provider.forceFlush().catch(() => undefined);
        return;
      }
      shared = undefined;
      try {
        await mine.provider.shutdown();
      } catch (err) {
        opts.logger?.warn({ err }, 'tracing shutdown failed; some spans may not have been exported');
      } finally {
        trace.disable();
        context.disable();
        propagation.disable();
      }
    },
  };
}
