/**
 * The cost of tracing on the host's ingest path (`IngestService`: its
 * `ingest` span and the trace context written into the record entry), measured
 * in a child process: alternating passes with tracing off (the API's no-op)
 * and on (every update sampled, exported over OTLP/HTTP JSON to a sink
 * process), so both see the same machine load. New runs' jobs are not
 * enqueued (a stub queue in both passes): the comparison is about tracing.
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
import type { RunQueue } from '../src/run-queue.js';
import { startTraceSink } from './trace-sink.js';

/** What one comparison measured. */
export interface TracingComparison {
  /** Median updates/s of the passes with tracing off / on. */
  off: number;
  on: number;
  /** Median of the per-pair on/off ratios, in %. */
  ratio: number;
  ratios: number[];
  /** Spans the sink received, and spans sampled. */
  exported: number;
  sampled: number;
}

const PAIRS = Number(process.env.BENCH_TRACING_PAIRS ?? 12);
const PASS = Number(process.env.BENCH_TRACING_UPDATES ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

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
  const pass = async (on: boolean, n = PASS): Promise<number> => {
    const service = new IngestService(new Dispatch({ client, prefix: `${base}${prefixes++}` }), stubQueue);
    const tracing = on ? startTracing({ env }) : undefined;
    let next = 0;
    const t0 = performance.now();
    try {
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < n) {
            const i = next++;
            await service.ingest({
              conversationId: `telegram:${i % 1000}`,
              updateKey: `telegram:${i}`,
              sender: { id: `u${i % 1000}` },
              text: texts[0]!,
              messageId: String(i),
            });
          }
        }),
      );
      return (n / (performance.now() - t0)) * 1000;
    } finally {
      await tracing?.shutdown(); // exports what is still buffered (not timed)
      if (on) sampled += Math.round(n * Number(env.OTEL_TRACES_SAMPLER_ARG));
    }
  };
  // Warm both paths (scripts loaded, JIT) outside the measurement.
  await pass(false, 2000);
  await pass(true, 2000);
  const offs: number[] = [];
  const ons: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < PAIRS; i++) {
    // Alternate which goes first: drift in machine load hits both sides alike.
    let off: number;
    let on: number;
    if (i % 2 === 0) {
      off = await pass(false);
      on = await pass(true);
    } else {
      on = await pass(true);
      off = await pass(false);
    }
    offs.push(off);
    ons.push(on);
    ratios.push((on / off) * 100);
  }
  const exported = await sink.count();
  sink.stop();
  await client.quit();
  const result: TracingComparison = { off: median(offs), on: median(ons), ratio: median(ratios), ratios, exported, sampled };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

if (process.env.BENCH_TRACING_CHILD) await child(process.env.BENCH_TRACING_CHILD);
