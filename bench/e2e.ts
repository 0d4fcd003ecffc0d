/**
 * `npm run bench -- e2e`: a message's way through steerbot, end to end. Signed
 * webhook POSTs arrive at a fixed rate (BENCH_RATES, default `50,200` msg/s)
 * over `rate × 10` conversations (each gets a message every 10 s, so a reply
 * is never queued behind its own conversation's previous one) for
 * BENCH_SECONDS (default 20, after BENCH_WARMUP_SECONDS = 3 not counted); the
 * local agent answers each on an instant model (fake OpenAI-compatible
 * server over real HTTP) and the webhook channel POSTs the reply to a
 * callback receiver. Latency is POST sent → callback received.
 *
 * Layouts: all-in-one (one process, host and runner) and split (one host and
 * two runner processes, concurrency divided between them); plus one Telegram
 * leg (all-in-one at the first rate, webhook mode, the real grammY client
 * sending to a fake Bot API server; latency is update POSTed → sendMessage
 * received). The sender, the model, the callback receiver and the fake Bot
 * API run in a driver process; every steerbot process is a child of its own
 * (running the compiled dist/, as `npm start` does; BENCH_APP=src runs the
 * sources through tsx) whose CPU (user + system, /proc) is counted, as is
 * redis-server's (a private one), and so are the Redis commands per message
 * (INFO commandstats; a script's own calls count too).
 *
 * Each layout runs traced (every message sampled); all-in-one also runs
 * without a tracing SDK, as steerbot runs by default, and that run is the one
 * the goal is judged on (its overhead subtracts the traced run's model.call
 * median). The breakdown per stage comes from the spans steerbot emits (kept
 * by an in-process span processor in each steerbot process):
 * the request's span (the route, carrying the ingest), queue wait (request end
 * → `run` start), run start → `model.call` (acquire, inputs, prompt), `model.call`,
 * model end → `delivery` (record the step, split), `delivery` (outbox claim,
 * store, acknowledge), delivery end → reply received (callback pump or Bot
 * API call). Framework overhead is total minus `model.call`; a traced
 * run's figures include the cost of tracing.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { type DriverReady, type LoadResult, loadDriver, type Sample } from './load-driver.js';
import { commandsPerMessage, startMeter } from './meter.js';
import { describePauses, type Pauses, slowDuringPauses, watchPauses } from './pauses.js';
import { privateRedis } from './private-redis.js';
import { type AppSpec, appProcess, ask, freePort, nowMs, pct, spawnRole, stopAll } from './processes.js';
import { keepSpans, type SpanRecord, spansByTrace } from './span-keeper.js';

const RATES = (process.env.BENCH_RATES ?? '50,200').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const LAYOUTS = (process.env.BENCH_LAYOUTS ?? 'all-in-one,split,telegram').split(',');
const GOAL_P50 = 25;
const GOAL_P99 = 80;

export async function main(): Promise<void> {
  if (process.env.BENCH_ROLE === 'driver') return loadDriver();
  if (process.env.BENCH_ROLE === 'app') return spanKeepingApp();
  await orchestrate();
}

// ---------------------------------------------------------------- one steerbot process

/** A steerbot process whose spans (BENCH_TRACED=1) are kept in process and handed over on `'spans'`. */
function spanKeepingApp(): void {
  const take = keepSpans();
  const pauses = watchPauses();
  appProcess((m) => (m === 'spans' ? { spans: take() } : m === 'pauses' ? { pauses: pauses.take() } : undefined));
}

// ---------------------------------------------------------------- orchestration

const e2eRole = (role: 'driver' | 'app', traced = false) => spawnRole('e2e', role, { BENCH_TRACED: traced ? '1' : '0' });
const fmt = (n: number) => (Number.isNaN(n) ? '   -' : n.toFixed(1).padStart(6));

/** Stage durations per trace, from the spans of every process. */
function stages(spans: SpanRecord[], from: number): Map<string, number[]> {
  // The route's span is named `<method> <path>`.
  const byTrace = spansByTrace(spans, (raw) => (raw.startsWith('POST ') ? 'http.request' : raw));
  const out = new Map<string, number[]>();
  const add = (stage: string, v: number | undefined) => {
    if (v === undefined || Number.isNaN(v)) return;
    const list = out.get(stage) ?? [];
    list.push(v);
    out.set(stage, list);
  };
  for (const t of byTrace.values()) {
    // One span per webhook request (it carries the ingest); an `ingest` span of its own only off HTTP.
    const http = t.get('http.request') ?? t.get('ingest');
    const ingest = t.get('ingest') ?? http;
    const run = t.get('run');
    const model = t.get('model.call');
    const delivery = t.get('delivery');
    if (!http || !ingest || !run || !model || !delivery || http[0] < from) continue;
    add('1 route + ingest (request span)', http[1] - http[0]);
    add('2 queue wait (request end → run start)', run[0] - ingest[1]);
    add('3 acquire + prompt (run start → model.call)', model[0] - run[0]);
    add('4 model.call', model[1] - model[0]);
    add('5 record (model end → delivery)', delivery[0] - model[1]);
    add('6 delivery (outbox → channel ack)', delivery[1] - delivery[0]);
    add('   finish (delivery end → run end)', run[1] - delivery[1]);
  }
  return out;
}

interface Scenario {
  name: string;
  rate: number;
  runners: number;
  channel: 'webhook' | 'telegram';
  /** Every message sampled and its spans kept (the breakdown); else no tracing SDK, as steerbot runs by default. */
  traced: boolean;
}

/** model.call p50 of the traced all-in-one run at each rate: an untraced run has no spans of its own to take it from. */
const modelP50ByRate = new Map<number, number>();

async function runScenario(s: Scenario, driverProc: ChildProcess, ready: DriverReady): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const prefix = `e2e${randomBytes(3).toString('hex')}`;
  const base = {
    redisEnv: { REDIS_URL: redis.url },
    prefix,
    modelUrl: ready.modelUrl,
    callbackUrl: ready.callbackUrl,
    ...(s.channel === 'telegram' && { telegramApiRoot: ready.telegramApiRoot }),
  };
  const specs: AppSpec[] =
    s.runners === 0
      ? [{ ...base, host: true, runner: true, concurrency: CONCURRENCY, port: await freePort() }]
      : [
          { ...base, host: true, runner: false, concurrency: 1, port: await freePort() },
          ...(await Promise.all(
            Array.from({ length: s.runners }, async () => ({
              ...base,
              host: false,
              runner: true,
              concurrency: Math.ceil(CONCURRENCY / s.runners),
              port: await freePort(),
            })),
          )),
        ];
  const apps = specs.map(() => e2eRole('app', s.traced));
  try {
    const started = await Promise.all(apps.map((a, i) => ask(a, 'started', { start: specs[i] })));
    const url = started[0].address as string;
    const endMeter = await startMeter(
      client,
      apps.map((a) => a.pid!),
    );
    await Promise.all(apps.map((a) => ask(a, 'pauses', 'pauses'))); // a new window
    const t0 = nowMs();
    const run = { url, rate: s.rate, channel: s.channel, conversations: s.rate * 10, seconds: SECONDS, warmupSeconds: WARMUP, drainMs: 15_000 };
    const done: LoadResult = await ask(driverProc, 'done', { run });
    const appPauses = (await Promise.all(apps.map((a) => ask(a, 'pauses', 'pauses')))) as Pauses[];
    const metered = await endMeter();
    const spans = (await Promise.all(apps.map((a) => ask(a, 'spans', 'spans')))).flat() as SpanRecord[];
    const messages = Math.round((WARMUP + SECONDS) * s.rate);
    report(s, done, spans, t0 + WARMUP * 1000, { cpu: metered.cpuMs, redisCpu: metered.redisCpuMs, messages, specs });
    reportCommands(metered.commands, messages);
    reportPauses(done, appPauses, specs, t0 + WARMUP * 1000);
  } finally {
    await stopAll(apps);
    client.disconnect();
    await redis.stop();
  }
}

function report(
  s: Scenario,
  done: LoadResult,
  spans: SpanRecord[],
  from: number,
  cpu: { cpu: number[]; redisCpu: number; messages: number; specs: AppSpec[] },
): void {
  const total = done.samples.map(([a, b]) => b - a).sort((x, y) => x - y);
  const st = stages(spans, from);
  const model = (st.get('4 model.call') ?? []).slice().sort((x, y) => x - y);
  const traced = s.traced && model.length > 0;
  const modelP50 = traced ? pct(model, 50) : (modelP50ByRate.get(s.rate) ?? 0);
  if (traced && s.runners === 0 && s.channel === 'webhook') modelP50ByRate.set(s.rate, modelP50);
  // Overhead per message is total minus that message's model call; without the pairing, total minus the median model call.
  const overhead = total.map((t) => t - modelP50);
  console.log(`\n== ${s.name}: ${s.rate} msg/s over ${s.rate * 10} conversations, ${SECONDS} s measured (${done.samples.length} replies)`);
  console.log(
    `   failed POSTs ${done.failed}${done.failed ? ` ${JSON.stringify(done.why)}` : ''}, replies missing after 15 s ${done.missing}, duplicated ${done.duplicated}`,
  );
  console.log(`   total (POST → reply received) ms: p50 ${fmt(pct(total, 50))}  p99 ${fmt(pct(total, 99))}  max ${fmt(total.at(-1) ?? Number.NaN)}`);
  const whose = traced ? '' : ' of the traced run';
  console.log(`   framework overhead (total − model.call p50 ${modelP50.toFixed(1)} ms${whose}): p50 ${fmt(pct(overhead, 50))}  p99 ${fmt(pct(overhead, 99))}`);
  if (traced) console.log('   stage (from spans)                              p50     p99');
  const keys = [...st.keys()].sort();
  for (const k of keys) {
    const v = st.get(k)!.sort((x, y) => x - y);
    console.log(`   ${k.padEnd(45)} ${fmt(pct(v, 50))}  ${fmt(pct(v, 99))}`);
  }
  const delivered = st.get('6 delivery (outbox → channel ack)');
  if (delivered) {
    // Reply received minus delivery end is not per trace (the driver's clock and the reply's trace are not paired); estimated from medians.
    const after = pct(total, 50) - keys.filter((k) => /^[1-6] /.test(k)).reduce((sum, k) => sum + pct(st.get(k)!, 50), 0);
    console.log(`   7 delivery end → reply received (est. from p50s)  ${fmt(after)}`);
  }
  const names = cpu.specs.map((p) => (p.host && p.runner ? 'all-in-one' : p.host ? 'host' : 'runner'));
  const perMsg = cpu.cpu.map((c, i) => `${names[i]} ${(c / cpu.messages).toFixed(2)}`);
  console.log(`   CPU per message, ms: ${perMsg.join(', ')}, redis-server ${(cpu.redisCpu / cpu.messages).toFixed(2)}`);
  if (s.runners === 0 && s.channel === 'webhook' && s.rate === 50) {
    const ok = pct(overhead, 50) <= GOAL_P50 && pct(overhead, 99) <= GOAL_P99;
    console.log(`   goal (overhead p50 <= ${GOAL_P50} ms, p99 <= ${GOAL_P99} ms): ${ok ? 'MET' : 'NOT MET'}`);
  }
}

/** Redis commands per message over the scenario (each is a round trip, or part of a pipeline), the most frequent first. */
function reportCommands(commands: Map<string, number>, messages: number): void {
  const { total, top } = commandsPerMessage(commands, messages);
  const shown = top.slice(0, Number(process.env.BENCH_TOP_COMMANDS ?? 8));
  console.log(`   Redis commands per message: ${total.toFixed(1)} (${shown.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')})`);
}

/** Each process's event-loop delay, GC and stalls, and how many slow messages were in flight during one. */
function reportPauses(done: { samples: Sample[]; pauses: Pauses }, apps: Pauses[], specs: AppSpec[], from: number): void {
  const names = specs.map((p, i) => (p.host && p.runner ? 'all-in-one' : p.host ? 'host' : `runner ${i}`));
  for (const line of describePauses('driver', done.pauses, from)) console.log(line);
  apps.forEach((p, i) => {
    for (const line of describePauses(names[i]!, p, from)) console.log(line);
  });
  const all = [...done.pauses.long, ...apps.flatMap((p) => p.long)];
  for (const slowMs of [80, 150]) {
    const { slow, duringPause } = slowDuringPauses(done.samples, all, slowMs);
    console.log(`   replies slower than ${slowMs} ms: ${slow}, of which ${duringPause} were in flight during a stall or GC pause ≥ 30 ms of some process`);
  }
}

async function orchestrate(): Promise<void> {
  console.log(`e2e: rates ${RATES.join(', ')} msg/s, ${SECONDS} s each after ${WARMUP} s warm-up, concurrency ${CONCURRENCY}; node ${process.version}`);
  const driverProc = e2eRole('driver');
  const ready = await ask(driverProc, 'ready');
  try {
    const scenarios: Scenario[] = [];
    for (const rate of RATES) {
      if (LAYOUTS.includes('all-in-one')) {
        scenarios.push({ name: 'all-in-one, traced', rate, runners: 0, channel: 'webhook', traced: true });
        scenarios.push({ name: 'all-in-one', rate, runners: 0, channel: 'webhook', traced: false });
      }
      if (LAYOUTS.includes('split')) scenarios.push({ name: 'split (1 host + 2 runners), traced', rate, runners: 2, channel: 'webhook', traced: true });
    }
    if (LAYOUTS.includes('telegram')) scenarios.push({ name: 'telegram all-in-one, traced', rate: RATES[0]!, runners: 0, channel: 'telegram', traced: true });
    for (const s of scenarios) await runScenario(s, driverProc, ready);
  } finally {
    driverProc.send('stop');
  }
}
