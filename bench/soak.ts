/**
 * `npm run bench -- soak`: the memory of one all-in-one process under a
 * steady load. Signed webhook messages arrive at BENCH_RATE msg/s (default
 * 50) over BENCH_CONVERSATIONS conversations (default 500) for BENCH_MINUTES
 * minutes (default 5), with BENCH_CONCURRENCY runs at once (default 32); the local agent answers each on an instant model
 * (fake OpenAI-compatible server, streaming) and the webhook channel POSTs
 * every reply to a callback receiver. The app (host, runner, HTTP ingress)
 * runs in this process, started with `--expose-gc` (the bench re-executes
 * itself with it when `global.gc` is missing); the sender, the model and the
 * callback receiver run in a child process, so their memory and CPU are not
 * counted. Redis is a private redis-server.
 *
 * Every 30 s it forces a full GC and prints the heap then (and the part of
 * it in V8's code spaces), RSS, messages sent and replies called back. At
 * the first minute and at the end it pauses the sender, waits until the
 * replies stop coming, and writes a heap snapshot. At the end: the heap
 * growth between those two samples, split from the snapshots into compiled
 * code (machine code, bytecode, feedback, hidden classes: the JIT warming
 * up, bounded by the program) and data (everything else: what messages
 * could leave behind), bytes of data retained per message, the slope of RSS
 * over the second half (least squares, MB/min), CPU of this process per
 * message, and a verdict against the goal: data on the heap grows <= 2 MB
 * after the first minute and the RSS slope is <= 5 MB/min.
 * `BENCH_HEAP_SNAPSHOTS` (seconds, comma-separated) writes more snapshots,
 * for `npm run bench -- heap-diff A B`.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getHeapSpaceStatistics, writeHeapSnapshot } from 'node:v8';
import { Redis } from 'ioredis';
import { readConfig } from '../app/config.js';
import { startApp } from '../app/start.js';
import { webhookChannelConfigSchema } from '../plugins/webhook/config.js';
import { signedHeaders } from '../plugins/webhook/signature.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { heapSplit } from './heap-diff.js';
import { privateRedis } from './private-redis.js';
import { type Footprint, familyLines, footprint, perMessageBeyondRecord } from './redis-footprint.js';

const MINUTES = Number(process.env.BENCH_MINUTES ?? 5);
const RATE = Number(process.env.BENCH_RATE ?? 50);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 500);
const SAMPLE_MS = Number(process.env.BENCH_SAMPLE_MS ?? 30_000);
/** Seconds after which a sample also writes a heap snapshot (e.g. `60,120,300`), for `bench/heap-diff.ts`. */
const SNAPSHOTS_AT = (process.env.BENCH_HEAP_SNAPSHOTS ?? '').split(',').filter(Boolean).map(Number);
const SECRET = 'bench-soak-secret-0123456789abcdef';
const GOAL_HEAP_MB = 2;
const GOAL_RSS_SLOPE = 5;
/** Redis bytes per message beyond the record, at the defaults, once the load has drained. */
const GOAL_REDIS_BYTES = 1024;
const MB = 1024 * 1024;

/** Messages from the driver (child) to the app (parent). */
type DriverMessage = { ready: { modelUrl: string; callbackUrl: string } } | { counts: { sent: number; failed: number; callbacks: number } };
/** Messages from the app (parent) to the driver (child). */
type AppMessage = { start: { url: string } } | 'counts' | 'pause' | 'resume' | 'stop';

interface Sample {
  seconds: number;
  heapMb: number;
  /** Of `heapMb`, the part in V8's code spaces (machine code and its trusted metadata; feedback and dependency lists are in old space). */
  codeMb: number;
  rssMb: number;
  sent: number;
  /** Path of the heap snapshot written after this sample, if one was. */
  snapshot?: string;
  callbacks: number;
}

export async function main(): Promise<void> {
  if (process.env.BENCH_SOAK_ROLE === 'driver') return driver();
  if (typeof global.gc !== 'function') return reexecWithGc();
  await soak();
}

/** Runs this bench again under `--expose-gc`, with the same loader flags and arguments. */
async function reexecWithGc(): Promise<void> {
  const child = fork(process.argv[1]!, process.argv.slice(2), { execArgv: [...process.execArgv, '--expose-gc'], stdio: 'inherit' });
  const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  process.exitCode = code;
}

/** The load: sender, instant model and callback receiver, in a child process. */
async function driver(): Promise<void> {
  const model = await startFakeOpenAI();
  model.script(() => ({ text: 'ok, noted.' }));
  let callbacks = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      callbacks++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callbacks`;
  const send = (m: DriverMessage) => process.send!(m);
  let sent = 0;
  let failed = 0;
  let timer: NodeJS.Timeout | undefined;
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  let target: URL | undefined;
  let t0 = 0;
  let issued = 0;
  const post = (n: number) => {
    const raw = JSON.stringify({
      id: `m-${n}-${randomBytes(4).toString('hex')}`,
      conversation: `c${n % CONVERSATIONS}`,
      sender: { id: `u${n % CONVERSATIONS}`, name: 'Ann' },
      text: `message ${n}: the quick brown fox jumps over the lazy dog`,
    });
    const req = request(target!, { method: 'POST', agent, headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) } }, (res) => {
      res.resume();
      if (res.statusCode === 202 || res.statusCode === 200) sent++;
      else failed++;
    });
    req.on('error', () => failed++);
    req.end(raw);
  };
  const tick = () => {
    const due = Math.floor(((performance.now() - t0) / 1000) * RATE);
    while (issued < due) post(issued++);
  };
  process.on('message', async (m: AppMessage) => {
    if (m === 'counts') return send({ counts: { sent, failed, callbacks } });
    if (m === 'stop') {
      clearInterval(timer);
      agent.destroy();
      receiver.closeAllConnections();
      receiver.close();
      await model.close();
      process.disconnect();
      return;
    }
    if (m === 'pause') return clearInterval(timer);
    if (m === 'resume') {
      t0 = performance.now() - (issued / RATE) * 1000; // the rate goes on from where it paused, with no burst
      timer = setInterval(tick, 20);
      return;
    }
    target = new URL('/webhooks/soak', m.start.url);
    t0 = performance.now();
    timer = setInterval(tick, 20);
  });
  send({ ready: { modelUrl: model.url, callbackUrl } });
}

/** Asks the driver something and waits for its answer. */
function ask<K extends 'ready' | 'counts'>(child: ChildProcess, kind: K, message?: AppMessage): Promise<Extract<DriverMessage, Record<K, unknown>>[K]> {
  return new Promise((resolve, reject) => {
    const onExit = () => reject(new Error('the soak driver exited'));
    const onMessage = (m: DriverMessage) => {
      if (!(kind in (m as object))) return;
      child.off('message', onMessage).off('exit', onExit);
      resolve((m as unknown as Record<K, never>)[kind]);
    };
    child.on('message', onMessage).once('exit', onExit);
    if (message !== undefined) child.send(message);
  });
}

/** V8 heap spaces that hold compiled code and its metadata (machine code, deoptimization data, relocation info, bytecode). */
const CODE_SPACES = new Set(['code_space', 'code_large_object_space', 'trusted_space', 'trusted_large_object_space']);

/**
 * Heap used after a forced full GC, the part of it in the code spaces, and
 * RSS, in MB. Between the two collections the event loop turns once, so the
 * FinalizationRegistry callbacks the first one scheduled (undici's `fetch`
 * registers every request) run and the second one collects what they let go.
 */
async function measure(): Promise<{ heapMb: number; codeMb: number; rssMb: number }> {
  global.gc!();
  await new Promise((r) => setImmediate(r));
  global.gc!();
  const m = process.memoryUsage();
  const code = getHeapSpaceStatistics()
    .filter((s) => CODE_SPACES.has(s.space_name))
    .reduce((sum, s) => sum + s.space_used_size, 0);
  return { heapMb: m.heapUsed / MB, codeMb: code / MB, rssMb: m.rss / MB };
}

/** A TCP port nobody listens on now (the app's config takes 1..65535, not 0). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const num = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const den = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

async function soak(): Promise<void> {
  console.log(
    `soak: ${RATE} msg/s over ${CONVERSATIONS} conversations for ${MINUTES} min (webhook channel with callbacks, instant model); node ${process.version}`,
  );
  const redis = await privateRedis();
  const child = fork(fileURLToPath(new URL('./index.ts', import.meta.url)), ['soak'], {
    env: { ...process.env, BENCH_SOAK_ROLE: 'driver' },
    execArgv: process.execArgv.filter((a) => a !== '--expose-gc'),
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
  });
  const { modelUrl, callbackUrl } = await ask(child, 'ready');
  const prefix = `soak${randomBytes(3).toString('hex')}`;
  const base = readConfig({
    env: {
      REDIS_URL: redis.url,
      STEERBOT_PREFIX: prefix,
      STEERBOT_QUEUE_NAME: `runs-${prefix}`,
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      LOG_LEVEL: 'silent',
      // Enough runs at once to keep up with the rate (the default 4 would let a backlog build up).
      STEERBOT_RUNNER_CONCURRENCY: process.env.BENCH_CONCURRENCY ?? '32',
      STEERBOT_MODEL: 'm',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000',
      OPENAI_API_KEY: 'k',
      OPENAI_BASE_URL: modelUrl,
    },
  });
  const config = {
    ...base,
    channels: { webhooks: { soak: webhookChannelConfigSchema.parse({ secret: SECRET, callbackUrl, maxSkewSeconds: 3600 }) } },
  };
  const app = await startApp({ config, dataDir: '.steerbot/soak-unused' });
  const redisClient = new Redis(redis.url);
  const redisBefore = (await footprint(redisClient)).usedMemory;
  let redisAfter: Footprint | undefined;
  const samples: Sample[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const sample = async (snapshot: boolean) => {
    const counts = await ask(child, 'counts', 'counts');
    const s: Sample = { seconds: (performance.now() - t0) / 1000, ...(await measure()), sent: counts.sent, callbacks: counts.callbacks };
    if (snapshot || (SNAPSHOTS_AT.length > 0 && s.seconds >= SNAPSHOTS_AT[0]!)) {
      if (!snapshot) SNAPSHOTS_AT.shift();
      s.snapshot = writeHeapSnapshot(join(tmpdir(), `soak-${process.pid}-${s.seconds.toFixed(0)}s.heapsnapshot`));
    }
    samples.push(s);
    console.log(
      `${s.seconds.toFixed(0).padStart(5)} s  heap ${s.heapMb.toFixed(1).padStart(7)} MB (code spaces ${s.codeMb.toFixed(1).padStart(4)})  rss ${s.rssMb.toFixed(1).padStart(7)} MB  sent ${String(s.sent).padStart(7)}  called back ${String(s.callbacks).padStart(7)}  failed ${counts.failed}${s.snapshot ? `  snapshot ${s.snapshot}` : ''}`,
    );
  };
  let cpu: NodeJS.CpuUsage;
  try {
    child.send({ start: { url: app.address! } } satisfies AppMessage);
    await sample(false);
    const end = t0 + MINUTES * 60_000;
    let minuteTaken = false;
    // The sample whose wait reaches the end is the last, and takes the end's snapshot (a timer may fire a
    // millisecond before `end`: comparing the clock after it could miss the end and leave no snapshot).
    for (let final = false; !final; ) {
      const left = end - performance.now();
      final = left <= SAMPLE_MS;
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(SAMPLE_MS, left))));
      // Snapshots at the first minute and at the end: what the heap holds as compiled code and as data.
      const snapshot: boolean = (!minuteTaken && performance.now() - t0 >= 60_000) || final;
      minuteTaken ||= snapshot;
      if (snapshot) await drain(child);
      await sample(snapshot);
      if (snapshot) child.send('resume' satisfies AppMessage);
    }
    cpu = process.cpuUsage(cpu0);
    redisAfter = await footprint(redisClient);
  } finally {
    child.send('stop' satisfies AppMessage);
    await app.stop();
    redisClient.disconnect();
    await redis.stop();
  }
  report(samples, cpu);
  reportRedis(redisBefore, redisAfter, samples.at(-1)!.sent);
}

/** What Redis holds per message once the load drained, beyond the record itself, against the goal. */
function reportRedis(before: number, after: Footprint, messages: number): void {
  const perMessage = perMessageBeyondRecord(before, after, messages);
  console.log(
    `redis: ${((after.usedMemory - before) / MB).toFixed(1)} MB more after ${messages} messages, of which the record ${(after.recordBytes / MB).toFixed(1)} MB; beyond the record ${perMessage.toFixed(0)} B per message; largest families:`,
  );
  for (const line of familyLines(after, messages)) console.log(line);
  console.log(
    `verdict (redis): ${perMessage <= GOAL_REDIS_BYTES ? 'PASS' : 'FAIL'} (goal: <= ${GOAL_REDIS_BYTES} B per message beyond the record, got ${perMessage.toFixed(0)})`,
  );
}

/**
 * Pauses the sender and waits until the replies stop coming (every one
 * called back, or none for 3 s; at most 60 s): the heap then holds what the
 * app keeps, not the messages in flight, whatever the machine's load.
 */
async function drain(child: ChildProcess): Promise<void> {
  child.send('pause' satisfies AppMessage);
  const deadline = performance.now() + 60_000;
  let last = -1;
  let still = 0;
  while (performance.now() < deadline) {
    const { sent, callbacks } = await ask(child, 'counts', 'counts');
    if (callbacks >= sent) return;
    still = callbacks === last ? still + 1 : 0;
    if (still >= 6) return;
    last = callbacks;
    await new Promise((r) => setTimeout(r, 500));
  }
}

const signed = (mb: number) => `${mb >= 0 ? '+' : ''}${mb.toFixed(2)}`;

/** Prints the run's figures and the verdict (the app is stopped: reading the snapshots does not disturb it). */
function report(samples: Sample[], cpu: NodeJS.CpuUsage): void {
  const last = samples.at(-1)!;
  const atMinute = samples.find((s) => s.seconds >= 60) ?? samples[0]!;
  const growthMb = last.heapMb - atMinute.heapMb;
  const messages = last.sent - atMinute.sent;
  const half = samples.filter((s) => s.seconds >= (MINUTES * 60) / 2);
  const rssSlope = slope(half.map((s) => [s.seconds / 60, s.rssMb]));
  const cpuMs = (cpu.user + cpu.system) / 1000 / Math.max(1, last.sent);
  console.log(
    `heap after full GC: ${atMinute.heapMb.toFixed(1)} MB at ${atMinute.seconds.toFixed(0)} s → ${last.heapMb.toFixed(1)} MB at the end (${signed(growthMb)} MB; code spaces ${signed(last.codeMb - atMinute.codeMb)} MB)`,
  );
  let dataGrowthMb = growthMb;
  if (atMinute.snapshot && last.snapshot && atMinute !== last) {
    const [a, b] = [heapSplit(atMinute.snapshot), heapSplit(last.snapshot)];
    dataGrowthMb = (b.data - a.data) / MB;
    console.log(
      `heap snapshots, same samples: compiled code and its metadata ${(a.code / MB).toFixed(1)} → ${(b.code / MB).toFixed(1)} MB (${signed((b.code - a.code) / MB)}), data ${(a.data / MB).toFixed(1)} → ${(b.data / MB).toFixed(1)} MB (${signed(dataGrowthMb)})`,
    );
  }
  console.log(
    `retained per message after the first minute: ${messages > 0 ? ((dataGrowthMb * MB) / messages).toFixed(0) : 0} B of data (${messages > 0 ? ((growthMb * MB) / messages).toFixed(0) : 0} B of heap; ${messages} messages)`,
  );
  console.log(`rss: ${samples[0]!.rssMb.toFixed(0)} → ${last.rssMb.toFixed(0)} MB; slope of the second half ${rssSlope.toFixed(2)} MB/min`);
  console.log(`cpu per message (this process): ${cpuMs.toFixed(2)} ms; replies called back ${last.callbacks} of ${last.sent} messages`);
  const pass = dataGrowthMb <= GOAL_HEAP_MB && rssSlope <= GOAL_RSS_SLOPE;
  console.log(
    `verdict: ${pass ? 'PASS' : 'FAIL'} (goal: data on the heap after the first minute grows <= ${GOAL_HEAP_MB} MB, got ${signed(dataGrowthMb)}; RSS slope of the second half <= ${GOAL_RSS_SLOPE} MB/min, got ${rssSlope.toFixed(2)})`,
  );
}
