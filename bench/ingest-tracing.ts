/**
 * The cost of tracing on the host's ingest path (`IngestService`: its
 * `ingest` span and the trace context written into the record entry), measured
 * in a child process in three kinds of pass, rotated so all see the same
 * machine load:
 * - off: the API's no-op;
 * - on: every update sampled, exported over OTLP/HTTP JSON to a sink process;
 * - floor: tracing on as above, but the untraced ingest (the dispatch and the
 *   counter `IngestService` keeps, no context written to the record) wrapped in
 *   one bare span with the same three start attributes, entering no context:
 *   what one exported span per update costs on this machine and runtime,
 *   whoever writes it.
 * `on / off` is the ratio; `on / floor` is what steerbot's own
 * instrumentation adds beyond the span itself. New runs' jobs are not
 * enqueued (a stub queue in every pass): the comparison is about tracing.
 *
 * Node 22 runs AsyncLocalStorage (the context manager's) on async_hooks, which
 * taxes every promise once it is active; `--experimental-async-context-frame`
 * (Node 24's default) does not. The child runs with or without it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startTracing } from '../app/telemetry.js';
import { IngestService } from '../host/ingest.js';
import { Dispatch } from '../src/protocol/index.js';
import type { RunQueue } from '../src/protocol/run-queue.js';
import type { IncomingMessage } from '../src/protocol/types.js';
import { metrics } from '../src/telemetry/metrics.js';
import { SPAN, tracer } from '../src/telemetry/tracing.js';
import { startTraceSink } from './trace-sink.js';

type Mode = 'off' | 'on' | 'floor';

/** One kind of pass, as measured. */
interface Passes {
  /** Median updates/s. */
  rate: number;
  /** Median CPU of this process per update (ingest, span, export; µs). */
  cpuUs: number;
}

/** What one comparison measured. */
export interface TracingComparison {
  off: Passes;
  on: Passes;
  floor: Passes;
  /** Medians of the per-round ratios, in %: on/off (with each round's), floor/off, on/floor. */
  ratio: number;
  ratios: number[];
  floorRatio: number;
  onFloor: number;
  /** Spans the sink received, and spans sampled. */
  exported: number;
  sampled: number;
}

const ROUNDS = Number(process.env.BENCH_TRACING_ROUNDS ?? 9);
const PASS = Number(process.env.BENCH_TRACING_UPDATES ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

const MODES: readonly Mode[] = ['off', 'on', 'floor'];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Runs the comparison in a child process against `redisUrl`; `frame`: with
 * `--experimental-async-context-frame`; `ratio`: head sampling ratio of the
 * traced passes (default 1: every update sampled).
 */
export async function tracingComparison(redisUrl: string, frame: boolean, ratio = 1): Promise<TracingComparison> {
  const args = [...(frame ? ['--experimental-async-context-frame'] : []), '--import', 'tsx', fileURLToPath(import.meta.url)];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, BENCH_TRACING_CHILD: redisUrl, BENCH_TRACING_RATIO: String(ratio) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const line = out.split('\n').find((l) => l.startsWith('{'));
  if (code !== 0 || !line) throw new Error(`tracing comparison failed (exit ${code}): ${out.slice(-2000)}`);
  return JSON.parse(line) as TracingComparison;
}

async function child(redisUrl: string): Promise<void> {
  const client = new Redis(redisUrl);
  const sink = await startTraceSink();
  const env = {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint,
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: process.env.BENCH_TRACING_RATIO ?? '1',
    // Room for every span of a pass: none is dropped, all are exported.
    OTEL_BSP_MAX_QUEUE_SIZE: String(PASS * 2),
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    OTEL_SERVICE_NAME: 'steerbot-bench',
  };
  const base = `bt${randomBytes(3).toString('hex')}`;
  const texts = ['the quick brown fox jumps over a lazy dog '.repeat(6)];
  let prefixes = 0;
  const stubQueue = { enqueue: async () => undefined } as unknown as RunQueue;
  let sampled = 0;
  const pass = async (mode: Mode, n = PASS): Promise<{ rate: number; cpuUs: number }> => {
    const dispatch = new Dispatch({ client, prefix: `${base}${prefixes++}` });
    const service = new IngestService(dispatch, stubQueue);
    const tracing = mode === 'off' ? undefined : startTracing({ env });
    // The floor: the dispatch and the counter IngestService keeps (no enqueue: every pass stubs it), inside one bare
    // span with the start attributes. No context is entered (a `context.with` per update would cost the floor more).
    const ingest: (m: IncomingMessage) => Promise<unknown> =
      mode === 'floor'
        ? async (m) => {
            const span = tracer().startSpan(SPAN.ingest, {
              attributes: { 'steerbot.channel': 'telegram', 'steerbot.conversation_id': m.conversationId, 'steerbot.update_key': m.updateKey },
            });
            try {
              const r = await dispatch.ingest(m);
              metrics.updatesIngested.inc({ channel: 'telegram', result: r.kind, reason: '' });
              return r;
            } finally {
              span.end();
            }
          }
        : (m) => service.ingest(m);
    let next = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let rate = 0;
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < n) {
            const i = next++;
            await ingest({
              conversationId: `telegram:${i % 1000}`,
              updateKey: `telegram:${i}`,
              sender: { id: `u${i % 1000}` },
              text: texts[0]!,
              messageId: String(i),
            });
          }
        }),
      );
      rate = (n / (performance.now() - t0)) * 1000;
    } finally {
      await tracing?.shutdown(); // exports what is still buffered: not in the rate, in the CPU
      if (mode !== 'off') sampled += Math.round(n * Number(env.OTEL_TRACES_SAMPLER_ARG));
    }
    const cpu = process.cpuUsage(cpu0);
    return { rate, cpuUs: (cpu.user + cpu.system) / n };
  };
  // Warm every path (scripts loaded, JIT) outside the measurement.
  for (const mode of MODES) await pass(mode, 2000);
  const runs: Record<Mode, Array<{ rate: number; cpuUs: number }>> = { off: [], on: [], floor: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // Rotate which goes first: drift in machine load hits every kind alike.
    for (let k = 0; k < MODES.length; k++) {
      const mode = MODES[(i + k) % MODES.length]!;
      runs[mode].push(await pass(mode));
    }
  }
  const of = (mode: Mode): Passes => ({ rate: median(runs[mode].map((r) => r.rate)), cpuUs: median(runs[mode].map((r) => r.cpuUs)) });
  const ratios = (a: Mode, b: Mode) => runs[a].map((r, i) => (r.rate / runs[b][i]!.rate) * 100);
  const exported = await sink.count();
  sink.stop();
  await client.quit();
  const result: TracingComparison = {
    off: of('off'),
    on: of('on'),
    floor: of('floor'),
    ratio: median(ratios('on', 'off')),
    ratios: ratios('on', 'off'),
    floorRatio: median(ratios('floor', 'off')),
    onFloor: median(ratios('on', 'floor')),
    exported,
    sampled,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.env.BENCH_TRACING_CHILD) await child(process.env.BENCH_TRACING_CHILD);
