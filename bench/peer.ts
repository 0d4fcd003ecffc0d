/**
 * `npm run bench -- peer`: steerbot against a floor bot, in the same run.
 * Both are Telegram bots in webhook mode answering private messages through
 * an instant OpenAI-compatible model; the platform (a fake Bot API) and the
 * model are local fakes in a driver process (bench/load-driver.ts). The floor
 * (bench/floor-bot.ts) is the least such a bot does: node:http, one `SET NX`
 * dedupe, a fetch to the model, a fetch to `sendMessage`.
 *
 * For each rate in BENCH_RATES (default `50,200` msg/s), BENCH_ROUNDS
 * rounds (default 3; the goals are judged on the medians, the machine being
 * shared and noisy) in which updates go round
 * BENCH_CHATS (default 500) private chats for BENCH_SECONDS (default 20,
 * after BENCH_WARMUP_SECONDS = 3 not counted). steerbot runs all-in-one
 * (host and runner in one process, concurrency BENCH_CONCURRENCY = 32), with
 * no tracing SDK as it runs by default, from the compiled dist/
 * (BENCH_APP=src: the sources under tsx); then the floor; each as a child
 * process on a fresh private redis-server. Printed per rate, each also as a
 * ratio to the floor: latency p50 / p99 (update POSTed → `sendMessage`
 * received, each reply matched with its update), the bot's CPU per message
 * and redis-server's (user + system, /proc), Redis commands per message
 * (INFO commandstats: a script's own calls count too), and how many updates
 * were answered, never answered or answered twice. CPU and commands are
 * counted over the whole window, warm-up included, per message sent in it.
 *
 * At each rate in BENCH_TRACED_RATES (default `200`), steerbot runs once more
 * with tracing on at the default sampling (every message: the SDK's
 * `parentbased_always_on`), exporting OTLP/HTTP to a local sink process
 * (bench/trace-sink.ts), as a collector would take it: its p50 / p99, CPU
 * per message and spans received, against the goal for a traced p99.
 *
 * Then, in a pass of its own (BENCH_MONITOR_SECONDS, default 5, after the
 * warm-up; MONITOR slows Redis, so never in the timed pass), steerbot's Redis
 * commands per message by stage (ingest, pickup, prompt, record, delivery,
 * finish, background), from MONITOR (bench/redis-stages.ts): scripts by name,
 * a script's own commands with it, BullMQ's share. BENCH_MONITOR_DUMP=<file>
 * writes the pass's MONITOR lines there.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Redis } from 'ioredis';
import { bullPrefixFor } from '../src/protocol/run-queue.js';
import { floorProcess } from './floor-bot.js';
import { type DriverReady, type LoadResult, type LoadRun, loadDriver } from './load-driver.js';
import { commandsPerMessage, type Metered, startMeter } from './meter.js';
import { privateRedis } from './private-redis.js';
import { type AppSpec, appProcess, ask, freePort, pct, spawnRole, stopAll } from './processes.js';
import { monitorCommands, STAGES, scriptNames, stageOf, type Tally } from './redis-stages.js';
import { startTraceSink, type TraceSink } from './trace-sink.js';

const RATES = (process.env.BENCH_RATES ?? '50,200').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CHATS = Number(process.env.BENCH_CHATS ?? 500);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const MONITOR_SECONDS = Number(process.env.BENCH_MONITOR_SECONDS ?? 5);
/** steerbot and the floor, one after the other, this many times per rate: the goals are judged on the medians. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TRACED_RATES = (process.env.BENCH_TRACED_RATES ?? '200').split(',').filter(Boolean).map(Number);

/** Issue 34's goals. */
const GOALS = {
  /** steerbot's CPU per message / the floor's, at most, by rate. */
  cpuRatio: { 50: 2.5, 200: 3 } as Record<number, number>,
  commandsPerMessage: 60,
  /** redis-server CPU per message at 50 msg/s, ms. */
  redisCpuMsAt50: 0.6,
  /** p99 at 200 msg/s, ms. */
  p99MsAt200: 30,
  /** p99 at 200 msg/s with every message traced (the default sampling), ms. */
  tracedP99MsAt200: 60,
};

type Bot = 'steerbot' | 'floor';

/** One round at one rate: steerbot's window, then the floor's. */
interface Round {
  steerbot: Leg;
  floor: Leg;
}

/** One bot's window at one rate. */
interface Leg {
  done: LoadResult;
  metered: Metered;
  /** Messages sent in the window, warm-up included. */
  messages: number;
  /** The MONITOR pass's tally. */
  tally?: Map<string, Tally>;
}

export async function main(): Promise<void> {
  if (process.env.BENCH_ROLE === 'driver') return loadDriver();
  if (process.env.BENCH_ROLE === 'app') return appProcess();
  if (process.env.BENCH_ROLE === 'floor') return floorProcess();
  await orchestrate();
}

async function orchestrate(): Promise<void> {
  console.log(
    `peer: Telegram webhook, rates ${RATES.join(', ')} msg/s over ${CHATS} chats, ${SECONDS} s each after ${WARMUP} s warm-up; ` +
      `steerbot all-in-one untraced (concurrency ${CONCURRENCY}) against the floor bot; node ${process.version}`,
  );
  const names = scriptNames();
  const driver = spawnRole('peer', 'driver');
  const ready: DriverReady = await ask(driver, 'ready');
  try {
    for (const rate of RATES) {
      const rounds: Round[] = [];
      for (let i = 1; i <= ROUNDS; i++) {
        const round = { steerbot: await runLeg('steerbot', rate, driver, ready), floor: await runLeg('floor', rate, driver, ready) };
        reportRound(rate, i, round);
        rounds.push(round);
      }
      reportGoals(rate, rounds);
      if (TRACED_RATES.includes(rate)) await tracedLeg(rate, driver, ready);
      const monitored = await runLeg('steerbot', rate, driver, ready, { names });
      reportStages(rate, monitored);
    }
  } finally {
    driver.send('stop');
  }
}

/** steerbot at `rate` with every message traced and exported to a local sink; printed against its goal. */
async function tracedLeg(rate: number, driver: ChildProcess, ready: DriverReady): Promise<void> {
  const sink = await startTraceSink();
  try {
    const leg = await runLeg('steerbot', rate, driver, ready, { sink });
    const s = figures(leg);
    const spans = await sink.count();
    console.log(`\n   steerbot traced (every message sampled, exported to a local OTLP sink), ${rate} msg/s`);
    printTable([
      ['', 'steerbot traced'],
      ['answered / missing / duplicated / failed POSTs', `${leg.done.samples.length} / ${leg.done.missing} / ${leg.done.duplicated} / ${leg.done.failed}`],
      ['latency p50 / p99, ms', `${f(s.p50)} / ${f(s.p99)}`],
      ['bot CPU per message, ms', f(s.cpu, 2)],
      ['spans received per message', f(spans / leg.messages)],
    ]);
    if (rate === 200) {
      const ok = s.p99 <= GOALS.tracedP99MsAt200;
      console.log(`   goal p99 ≤ ${GOALS.tracedP99MsAt200} ms traced: ${ok ? 'MET' : 'NOT MET'} (${f(s.p99)} ms)`);
    }
  } finally {
    sink.stop();
  }
}

/** How a leg runs beyond bot and rate: `names`, the MONITOR pass; `sink`, traced into it. */
interface LegOptions {
  names?: Map<string, string>;
  sink?: TraceSink;
}

/** One bot on a fresh private Redis at `rate`. */
async function runLeg(bot: Bot, rate: number, driver: ChildProcess, ready: DriverReady, { names, sink }: LegOptions = {}): Promise<Leg> {
  const redis = await privateRedis();
  const prefix = `peer${randomBytes(3).toString('hex')}`;
  const spec: AppSpec = {
    redisEnv: { REDIS_URL: redis.url },
    prefix,
    host: true,
    runner: true,
    concurrency: CONCURRENCY,
    port: await freePort(),
    modelUrl: ready.modelUrl,
    callbackUrl: ready.callbackUrl,
    telegramApiRoot: ready.telegramApiRoot,
  };
  // Spawned before the client connects: a stale dist/ is rebuilt here, blocking this process.
  const child = spawnRole('peer', bot === 'steerbot' ? 'app' : 'floor', sink ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint } : {});
  const client = new Redis(redis.url);
  try {
    const { address } = await ask(child, 'started', { start: spec });
    const dump = names && process.env.BENCH_MONITOR_DUMP ? createWriteStream(process.env.BENCH_MONITOR_DUMP) : undefined;
    const monitor = names ? await monitorCommands(redis.url, names, { prefix, bullPrefix: bullPrefixFor(prefix) }, dump) : undefined;
    const seconds = names ? MONITOR_SECONDS : SECONDS;
    const endMeter = await startMeter(client, [child.pid!]);
    const run: LoadRun = { url: address, rate, channel: 'telegram', conversations: CHATS, seconds, warmupSeconds: WARMUP, drainMs: 15_000 };
    const done: LoadResult = await ask(driver, 'done', { run });
    const metered = await endMeter();
    const tally = await monitor?.stop();
    dump?.end();
    return { done, metered, messages: Math.round((WARMUP + seconds) * rate), ...(tally && { tally }) };
  } finally {
    await stopAll([child]);
    client.disconnect();
    await redis.stop();
  }
}

// ---------------------------------------------------------------- reports

const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** Rows of cells, columns padded (the first to the left, the others to the right). */
function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  for (const r of rows) console.log(`   ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('   ')}`);
}

/** A leg's figures: latency, CPU and commands per message. */
function figures(leg: Leg) {
  const latency = leg.done.samples.map(([a, b]) => b - a).sort((x, y) => x - y);
  return {
    p50: pct(latency, 50),
    p99: pct(latency, 99),
    cpu: leg.metered.cpuMs[0]! / leg.messages,
    redisCpu: leg.metered.redisCpuMs / leg.messages,
    commands: commandsPerMessage(leg.metered.commands, leg.messages),
  };
}

function reportRound(rate: number, i: number, { steerbot, floor }: Round): void {
  const s = figures(steerbot);
  const fl = figures(floor);
  const ratio = (a: number, b: number) => `${f(a / b, 2)}×`;
  const counts = (l: Leg) => `${l.done.samples.length} / ${l.done.missing} / ${l.done.duplicated} / ${l.done.failed}`;
  console.log(
    `\n== ${rate} msg/s over ${CHATS} chats, round ${i} of ${ROUNDS}: ${SECONDS} s measured after ${WARMUP} s warm-up (${Math.round(SECONDS * rate)} updates measured)`,
  );
  printTable([
    ['', 'steerbot', 'floor', 'steerbot / floor'],
    ['answered / missing / duplicated / failed POSTs', counts(steerbot), counts(floor), ''],
    ['latency p50, ms', f(s.p50), f(fl.p50), ratio(s.p50, fl.p50)],
    ['latency p99, ms', f(s.p99), f(fl.p99), ratio(s.p99, fl.p99)],
    ['bot CPU per message, ms', f(s.cpu, 2), f(fl.cpu, 2), ratio(s.cpu, fl.cpu)],
    ['redis-server CPU per message, ms', f(s.redisCpu, 3), f(fl.redisCpu, 3), ratio(s.redisCpu, fl.redisCpu)],
    ['Redis commands per message', f(s.commands.total), f(fl.commands.total), ratio(s.commands.total, fl.commands.total)],
  ]);
  const top = s.commands.top.slice(0, 10).map(([k, v]) => `${k} ${f(v)}`);
  console.log(`   steerbot's commands per message (INFO commandstats): ${top.join(', ')}`);
}

/** The goals at `rate`, judged on the medians of the rounds (each round's figure listed beside). */
function reportGoals(rate: number, rounds: Round[]): void {
  const median = (xs: number[]) =>
    pct(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const each = (pick: (r: Round) => number, digits: number, unit = '') => {
    const xs = rounds.map(pick);
    return { value: median(xs), text: `${f(median(xs), digits)}${unit}${xs.length > 1 ? ` (rounds ${xs.map((x) => f(x, digits)).join(', ')})` : ''}` };
  };
  const goal = (what: string, got: { value: number; text: string }, limit: number) =>
    console.log(`   goal ${what}: ${got.value <= limit ? 'MET' : 'NOT MET'} (median ${got.text})`);
  console.log(`\n   goals at ${rate} msg/s, on the median of ${rounds.length} round(s):`);
  const cpuGoal = GOALS.cpuRatio[rate];
  if (cpuGoal !== undefined)
    goal(
      `bot CPU/msg ≤ ${cpuGoal}× floor`,
      each((r) => figures(r.steerbot).cpu / figures(r.floor).cpu, 2, '×'),
      cpuGoal,
    );
  goal(
    `Redis commands/msg ≤ ${GOALS.commandsPerMessage}`,
    each((r) => figures(r.steerbot).commands.total, 1),
    GOALS.commandsPerMessage,
  );
  if (rate === 50)
    goal(
      `redis-server CPU/msg ≤ ${GOALS.redisCpuMsAt50} ms`,
      each((r) => figures(r.steerbot).redisCpu, 3, ' ms'),
      GOALS.redisCpuMsAt50,
    );
  if (rate === 200)
    goal(
      `p99 ≤ ${GOALS.p99MsAt200} ms untraced`,
      each((r) => figures(r.steerbot).p99, 1, ' ms'),
      GOALS.p99MsAt200,
    );
  const lost = rounds.reduce((n, r) => n + r.steerbot.done.missing + r.steerbot.done.duplicated + r.floor.done.missing + r.floor.done.duplicated, 0);
  console.log(`   every update answered exactly once, every round: ${lost === 0 ? 'yes' : 'NO'}`);
}

function reportStages(rate: number, leg: Leg): void {
  const per = (n: number) => n / leg.messages;
  const byStage = new Map<string, { calls: number; inner: number; bullmq: number; labels: Array<[string, Tally]> }>();
  for (const [label, t] of leg.tally!) {
    const stage = stageOf(label);
    const s = byStage.get(stage) ?? { calls: 0, inner: 0, bullmq: 0, labels: [] };
    s.calls += t.calls;
    s.inner += t.inner;
    if (label.startsWith('bullmq ')) s.bullmq += t.calls + t.inner;
    s.labels.push([label, t]);
    byStage.set(stage, s);
  }
  const all = [...byStage.values()].reduce((a, s) => ({ calls: a.calls + s.calls, inner: a.inner + s.inner, bullmq: a.bullmq + s.bullmq }), {
    calls: 0,
    inner: 0,
    bullmq: 0,
  });
  const seconds = MONITOR_SECONDS + WARMUP;
  console.log(`\n   steerbot's Redis commands per message by stage, ${rate} msg/s (MONITOR pass of its own: ${seconds} s, ${leg.messages} updates)`);
  const rows = [['stage', 'top-level', 'in scripts', 'total', 'BullMQ', 'what (top-level + in scripts, per message)']];
  for (const stage of [...STAGES, 'other']) {
    const s = byStage.get(stage);
    if (!s) continue;
    const what = s.labels
      .sort((a, b) => b[1].calls + b[1].inner - (a[1].calls + a[1].inner))
      .map(([label, t]) => `${label} ${f(per(t.calls), 2)}${t.inner ? `+${f(per(t.inner), 1)}` : ''}`)
      .join(', ');
    rows.push([stage, f(per(s.calls)), f(per(s.inner)), f(per(s.calls + s.inner)), f(per(s.bullmq)), what]);
  }
  rows.push(['total', f(per(all.calls)), f(per(all.inner)), f(per(all.calls + all.inner)), f(per(all.bullmq)), '']);
  printTable(rows);
  const stats = commandsPerMessage(leg.metered.commands, leg.messages).total;
  console.log(
    `   BullMQ's share: ${f((all.bullmq / (all.calls + all.inner)) * 100)} % of the commands; ` +
      `MONITOR saw ${f(per(all.calls + all.inner))} per message, INFO commandstats counted ${f(stats)} over the same pass; ` +
      `answered / missing / duplicated ${leg.done.samples.length} / ${leg.done.missing} / ${leg.done.duplicated}`,
  );
  console.log('   inside each script, per call (the costliest per message first):');
  const scripts = [...leg.tally!].filter(([, t]) => t.inner > 0).sort((x, y) => y[1].inner - x[1].inner);
  for (const [label, t] of scripts) {
    const inside = [...t.innerByCommand]
      .sort((x, y) => y[1] - x[1])
      .map(([c, n]) => `${c} ${f(n / t.calls)}`)
      .join(', ');
    console.log(`     ${label} (${f(per(t.calls), 2)} calls/msg): ${f(t.inner / t.calls)} = ${inside}`);
  }
}
