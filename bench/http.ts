/**
 * `npm run bench -- http`: webhook ingress over real HTTP. Signed webhook
 * POSTs go through the whole ingest path (signature check on the raw body,
 * zod, channel host, the ingest script, BullMQ enqueue of new runs) on the
 * host's Fastify server; the same requests go to a bare route on the same
 * server that only parses the JSON body and answers 202. Prints requests/s,
 * p50/p99 latency of each, and their ratio (target >= 70 %). A third route,
 * the same ingest without the webhook edge (no signature, validation or
 * channel host), attributes the gap between the ingest and the edge; a
 * fourth, the bare route plus one no-op EVALSHA per request, shows what a
 * Redis round trip alone costs. Ingest phases also print how many updates
 * each ingest script call carried (group commit, `src/scripts/batch.ts`).
 *
 * Each round also posts the webhook requests once more with tracing on in
 * the server (every request sampled: its `POST` span, which carries the
 * ingest's attributes, exported over OTLP/HTTP JSON to a sink process) and
 * prints tracing on / off for the webhook route (target >= 85 %), and once
 * more with 10 % of requests sampled (`parentbased_traceidratio`; target >= 97 %).
 * A third traced phase samples nothing: the SDK is registered and every
 * request is dropped at the sampler, which is the floor the runtime sets
 * (on Node 22 a registered context manager turns on promise hooks for every
 * promise); both traced figures are also printed against it.
 *
 * The server runs in a worker thread (its own event loop) so the client's
 * work does not slow it down; the client is node:http with keep-alive over
 * loopback. Redis is a private redis-server.
 */
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { readConfig } from '../app/config.js';
import { hostFeatures } from '../app/features/index.js';
import { createChannels } from '../app/start.js';
import { startTracing, type Tracing } from '../app/telemetry.js';
import { createHttpServer, listen } from '../host/http.js';
import { startHost } from '../host/main.js';
import { webhookChannelConfigSchema } from '../plugins/webhook/config.js';
import { signedHeaders } from '../plugins/webhook/signature.js';
import type { AppContext } from '../src/app-context.js';
import { createLogger } from '../src/logger.js';
import { closeRedis, createRedis, redisFromConfig } from '../src/redis/connection.js';
import { conversationKeys } from '../src/redis/keys.js';
import { runScript } from '../src/scripts/index.js';
import { privateRedis } from './private-redis.js';
import { startTraceSink } from './trace-sink.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 6_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 1_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SECRET = 'bench-secret-0123456789abcdef';
const WEBHOOK_PATH = '/webhooks/bench';
const BARE_PATH = '/bench/bare';
const INGEST_PATH = '/bench/ingest-only';
const ROUND_TRIP_PATH = '/bench/round-trip';

interface ServerInit {
  redisUrl: string;
  prefix: string;
  /** OTLP endpoint of the trace sink, for the traced phases. */
  traceEndpoint: string;
}

/** Tracing in the server for the traced phases: every request sampled, spans batched to the sink. */
const tracingEnv = (endpoint: string, ratio: number) => ({
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  OTEL_TRACES_SAMPLER: ratio === 1 ? 'parentbased_always_on' : 'parentbased_traceidratio',
  OTEL_TRACES_SAMPLER_ARG: String(ratio),
  // Room for every span of a phase (two per request): none is dropped.
  OTEL_BSP_MAX_QUEUE_SIZE: String(REQUESTS * 4),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '512',
  OTEL_BSP_SCHEDULE_DELAY: '200',
  OTEL_SERVICE_NAME: 'steerbot-bench',
});

/** The server side (worker thread): the host with one webhook channel, plus the bare route. */
async function serve({ redisUrl, prefix, traceEndpoint }: ServerInit): Promise<void> {
  const base = readConfig({
    env: { REDIS_URL: redisUrl, STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `bench-${prefix}`, STEERBOT_RUNNER: 'false', LOG_LEVEL: 'silent' },
  });
  const config = { ...base, channels: { webhooks: { bench: webhookChannelConfigSchema.parse({ secret: SECRET, maxSkewSeconds: 3600 }) } } };
  const logger = createLogger({ level: 'silent' });
  const redis = createRedis({ url: redisUrl });
  const ctx: AppContext = {
    config,
    logger,
    redisUrl,
    redisConnection: { url: redisUrl },
    redis,
    connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, url: redisUrl }),
  };
  const http = createHttpServer({ config, redis, logger });
  const host = await startHost(
    { ...ctx, http },
    { channels: await createChannels(config, { logger, redis, prefix: config.redis.prefix }), steeringCapable: true, features: hostFeatures() },
  );
  // The baseline: same server, same requests; Fastify parses the JSON body, nothing else happens.
  http.post(BARE_PATH, async (_req, reply) => reply.code(202).send({ result: 'accepted' }));
  // For attribution: the same ingest (IngestService) without signature, webhook validation or channel host.
  http.post(INGEST_PATH, async (req, reply) => {
    const b = req.body as { id: string; conversation: string; sender: { id: string; name?: string }; text: string };
    const r = await host.ingest.ingest({
      conversationId: `webhook:bench:${b.conversation}`,
      updateKey: `webhook:bench:ingest-only-${b.id}`,
      sender: b.sender,
      text: b.text,
    });
    return reply.code(r.kind === 'duplicate' ? 200 : 202).send({ result: r.kind, seq: r.seq });
  });
  // What one Redis round trip alone costs a route: the bare route plus one no-op EVALSHA per request on the host's connection.
  const noopKey = conversationKeys(prefix, 'webhook:bench:floor').meta;
  http.post(ROUND_TRIP_PATH, async (_req, reply) => {
    await runScript(redis, 'noop', [noopKey], []);
    return reply.code(202).send({ result: 'accepted' });
  });
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  let tracing: Tracing | undefined;
  parentPort!.on('message', async (m: unknown) => {
    if (m === 'elu') return parentPort!.postMessage({ elu: performance.eventLoopUtilization(), batch: { ...host.dispatch.ingestBatch.stats } });
    if (typeof m === 'string' && m.startsWith('tracing ')) {
      // Off exports what is still buffered before it answers: that work lands between phases, not in one.
      if (m === 'tracing off') await tracing?.shutdown();
      else tracing = startTracing({ env: tracingEnv(traceEndpoint, Number(m.slice('tracing on '.length))) });
      return parentPort!.postMessage({ tracing: m });
    }
    if (m !== 'stop') return;
    await http.close();
    await host.queue.queue.obliterate({ force: true }).catch(() => undefined);
    await host.stop();
    await closeRedis(redis);
    parentPort!.postMessage({ stopped: true });
  });
  parentPort!.postMessage({ address });
}

interface Phase {
  /** Share of the phase the server's event loop was busy (1 = CPU-bound). */
  elu: number;
  /** Updates per ingest script call (group commit), when the phase ingested. */
  perCall: number;
  /** CPU of this process (client and server threads) per request, µs. */
  nodeCpuUs: number;
  /** CPU of redis-server per request, µs. */
  redisCpuUs: number;
  rps: number;
  p50: number;
  p99: number;
  statuses: Map<number, number>;
}

const WORDS = 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call'.split(' ');
const text = () => Array.from({ length: 20 + Math.floor(Math.random() * 60) }, () => WORDS[Math.floor(Math.random() * WORDS.length)]).join(' ');

/** Signed bodies, prepared before the clock starts. */
function prepare(n: number, round: number): Array<{ body: Buffer; headers: Record<string, string> }> {
  const now = Math.floor(Date.now() / 1000);
  return Array.from({ length: n }, (_, i) => {
    const body = Buffer.from(
      JSON.stringify({ id: `r${round}-${i}`, conversation: `c${i % CONVERSATIONS}`, sender: { id: `u${i % CONVERSATIONS}`, name: 'Ada' }, text: text() }),
    );
    return { body, headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...signedHeaders(SECRET, body, now) } };
  });
}

function post(agent: Agent, url: URL, path: string, req: { body: Buffer; headers: Record<string, string> }): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = request({ agent, host: url.hostname, port: url.port, path, method: 'POST', headers: req.headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    r.on('error', reject);
    r.end(req.body);
  });
}

type Elu = { idle: number; active: number };
type Counters = { elu: Elu; batch: { calls: number; items: number } };
/** The server thread's event-loop utilization counters and ingest batch counts. */
function serverElu(worker: Worker): Promise<Counters> {
  return new Promise((resolve) => {
    const on = (m: Partial<Counters>) => {
      if (!m.elu || !m.batch) return;
      worker.off('message', on);
      resolve(m as Counters);
    };
    worker.on('message', on);
    worker.postMessage('elu');
  });
}

/** redis-server's used CPU (user + system), in µs. */
async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const num = (k: string) => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (num('used_cpu_user') + num('used_cpu_sys')) * 1e6;
}

/** Turns tracing in the server on (sampling `ratio` of the requests) or off, and waits until it has. */
function setTracing(worker: Worker, ratio: number | false): Promise<void> {
  const want = ratio === false ? 'tracing off' : `tracing on ${ratio}`;
  return new Promise((resolve) => {
    const done = (m: { tracing?: string }) => {
      if (m.tracing !== want) return;
      worker.off('message', done);
      resolve();
    };
    worker.on('message', done);
    worker.postMessage(want);
  });
}

/** One webhook phase with tracing on in the server, `ratio` of the requests sampled (default all). */
async function tracedPhase(
  worker: Worker,
  agent: Agent,
  url: URL,
  reqs: Array<{ body: Buffer; headers: Record<string, string> }>,
  admin: Redis,
  ratio = 1,
): Promise<Phase> {
  await setTracing(worker, ratio);
  try {
    return await phase(worker, agent, url, WEBHOOK_PATH, reqs, admin);
  } finally {
    await setTracing(worker, false);
  }
}

async function phase(
  worker: Worker,
  agent: Agent,
  url: URL,
  path: string,
  reqs: Array<{ body: Buffer; headers: Record<string, string> }>,
  admin: Redis,
): Promise<Phase> {
  const { elu: elu0, batch: batch0 } = await serverElu(worker);
  const cpu0 = process.cpuUsage();
  const rcpu0 = await redisCpu(admin);
  const latencies = new Float64Array(reqs.length);
  const statuses = new Map<number, number>();
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < reqs.length) {
        const i = next++;
        const start = performance.now();
        const status = await post(agent, url, path, reqs[i]!);
        latencies[i] = performance.now() - start;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const rcpu = (await redisCpu(admin)) - rcpu0;
  const { elu: elu1, batch: batch1 } = await serverElu(worker);
  const elu = (elu1.active - elu0.active) / (elu1.active + elu1.idle - elu0.active - elu0.idle);
  const perCall = (batch1.items - batch0.items) / Math.max(1, batch1.calls - batch0.calls);
  latencies.sort();
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return {
    elu,
    perCall,
    nodeCpuUs: (cpu.user + cpu.system) / reqs.length,
    redisCpuUs: rcpu / reqs.length,
    rps: (reqs.length / ms) * 1000,
    p50: at(0.5),
    p99: at(0.99),
    statuses,
  };
}

const fmt = (p: Phase) =>
  `${p.rps.toFixed(0).padStart(7)} req/s   p50 ${p.p50.toFixed(2).padStart(6)} ms   p99 ${p.p99.toFixed(2).padStart(6)} ms   server loop busy ${(p.elu * 100).toFixed(0).padStart(3)} %   cpu/req node ${p.nodeCpuUs.toFixed(0).padStart(4)} µs redis ${p.redisCpuUs.toFixed(0).padStart(3)} µs   ${p.perCall > 0 ? `${p.perCall.toFixed(1).padStart(4)} updates/script call` : '                        '}   statuses ${[...p.statuses].map(([s, c]) => `${s}×${c}`).join(' ')}`;

export async function main(): Promise<void> {
  const redis = await privateRedis();
  const sink = await startTraceSink();
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const worker = new Worker(fileURLToPath(import.meta.url), {
    workerData: { redisUrl: redis.url, prefix, traceEndpoint: sink.endpoint } satisfies ServerInit,
  });
  const failed = new Promise<never>((_, reject) => worker.once('error', reject));
  const address = await Promise.race([new Promise<string>((resolve) => worker.once('message', (m: { address: string }) => resolve(m.address))), failed]);
  const url = new URL(address);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const admin = new Redis(redis.url);
  try {
    // Warm-up: connections, JIT, script loading (EVALSHA miss), BullMQ.
    await phase(worker, agent, url, BARE_PATH, prepare(1000, 0), admin);
    await phase(worker, agent, url, WEBHOOK_PATH, prepare(1000, 0), admin);
    await phase(worker, agent, url, INGEST_PATH, prepare(1000, 0), admin);
    await phase(worker, agent, url, ROUND_TRIP_PATH, prepare(1000, 0), admin);
    await tracedPhase(worker, agent, url, prepare(1000, -ROUNDS - 1), admin);

    console.log(
      `http benchmark: ${REQUESTS} requests per phase, concurrency ${CONCURRENCY}, keep-alive over loopback, ${CONVERSATIONS} conversations, server in a worker thread${redis.shared ? ' (SHARED redis)' : ' (private redis-server)'}`,
    );
    const bare: Phase[] = [];
    const hook: Phase[] = [];
    const ingest: Phase[] = [];
    const trip: Phase[] = [];
    const traced: Phase[] = [];
    const sampled: Phase[] = [];
    const floor: Phase[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const reqs = prepare(REQUESTS, round);
      bare.push(await phase(worker, agent, url, BARE_PATH, reqs, admin));
      // Traced and untraced webhook phases back to back, alternating which goes first; the traced one gets fresh
      // update keys (the same keys again would be duplicates, a cheaper path).
      const tracedReqs = prepare(REQUESTS, -round);
      const sampledReqs = prepare(REQUESTS, -round - 1000);
      const floorReqs = prepare(REQUESTS, -round - 2000);
      if (round % 2 === 0) traced.push(await tracedPhase(worker, agent, url, tracedReqs, admin));
      if (round % 2 === 0) sampled.push(await tracedPhase(worker, agent, url, sampledReqs, admin, 0.1));
      if (round % 2 === 0) floor.push(await tracedPhase(worker, agent, url, floorReqs, admin, 0));
      hook.push(await phase(worker, agent, url, WEBHOOK_PATH, reqs, admin));
      if (round % 2 === 1) floor.push(await tracedPhase(worker, agent, url, floorReqs, admin, 0));
      if (round % 2 === 1) sampled.push(await tracedPhase(worker, agent, url, sampledReqs, admin, 0.1));
      if (round % 2 === 1) traced.push(await tracedPhase(worker, agent, url, tracedReqs, admin));
      ingest.push(await phase(worker, agent, url, INGEST_PATH, reqs, admin));
      trip.push(await phase(worker, agent, url, ROUND_TRIP_PATH, reqs, admin));
      console.log(`  round ${round} bare route:      ${fmt(bare.at(-1)!)}`);
      console.log(`  round ${round} signed webhook:  ${fmt(hook.at(-1)!)}   ratio ${((hook.at(-1)!.rps / bare.at(-1)!.rps) * 100).toFixed(1)} %`);
      console.log(
        `  round ${round} webhook, traced: ${fmt(traced.at(-1)!)}   tracing on / off ${((traced.at(-1)!.rps / hook.at(-1)!.rps) * 100).toFixed(1)} %`,
      );
      console.log(
        `  round ${round} webhook, 10 %:   ${fmt(sampled.at(-1)!)}   tracing on / off ${((sampled.at(-1)!.rps / hook.at(-1)!.rps) * 100).toFixed(1)} %`,
      );
      console.log(`  round ${round} ingest only:     ${fmt(ingest.at(-1)!)}   ratio ${((ingest.at(-1)!.rps / bare.at(-1)!.rps) * 100).toFixed(1)} %`);
      console.log(`  round ${round} no-op round trip: ${fmt(trip.at(-1)!)}   ratio ${((trip.at(-1)!.rps / bare.at(-1)!.rps) * 100).toFixed(1)} %`);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const bareRps = median(bare.map((p) => p.rps));
    const hookRps = median(hook.map((p) => p.rps));
    console.log(
      `  median bare route:      ${bareRps.toFixed(0)} req/s   p50 ${median(bare.map((p) => p.p50)).toFixed(2)} ms   p99 ${median(bare.map((p) => p.p99)).toFixed(2)} ms`,
    );
    console.log(
      `  median signed webhook:  ${hookRps.toFixed(0)} req/s   p50 ${median(hook.map((p) => p.p50)).toFixed(2)} ms   p99 ${median(hook.map((p) => p.p99)).toFixed(2)} ms`,
    );
    // Each round's two phases ran back to back under the same machine load: their ratio is the steadier number.
    const ratios = bare.map((b, i) => hook[i]!.rps / b.rps);
    console.log(
      `  ratio webhook / bare:   ${(median(ratios) * 100).toFixed(1)} % median of rounds (${ratios.map((r) => (r * 100).toFixed(0)).join(', ')} %), ${((hookRps / bareRps) * 100).toFixed(1)} % of medians   (target >= 70 %)`,
    );
    // Where the gap comes from: the ingest itself (one EVALSHA + enqueue of new runs) vs the webhook edge (signature, validation, channel host).
    const ingestRatios = bare.map((b, i) => ingest[i]!.rps / b.rps);
    const edgeRatios = ingest.map((g, i) => hook[i]!.rps / g.rps);
    console.log(
      `  attribution:            ingest only / bare ${(median(ingestRatios) * 100).toFixed(1)} %, webhook / ingest only ${(median(edgeRatios) * 100).toFixed(1)} % (medians of rounds)`,
    );
    const tracedRatios = hook.map((h, i) => traced[i]!.rps / h.rps);
    console.log(
      `  tracing on / off:       ${(median(tracedRatios) * 100).toFixed(1)} % median of rounds (${tracedRatios.map((r) => (r * 100).toFixed(0)).join(', ')} %), webhook route, every request sampled, one span per request, ${await sink.count()} spans exported in all   (target >= 85 %)`,
    );
    const sampledRatios = hook.map((h, i) => sampled[i]!.rps / h.rps);
    console.log(
      `  tracing at 10 %:        ${(median(sampledRatios) * 100).toFixed(1)} % median of rounds (${sampledRatios.map((r) => (r * 100).toFixed(0)).join(', ')} %), parentbased_traceidratio 0.1   (target >= 97 %)`,
    );
    const pct = (xs: Phase[], of: Phase[]) => `${(median(xs.map((x, i) => x.rps / of[i]!.rps)) * 100).toFixed(1)} %`;
    console.log(
      `  floor, nothing sampled: ${pct(floor, hook)} of off (the SDK registered, every request dropped at the sampler: the runtime's cost); every request sampled ${pct(traced, floor)} of it, 10 % ${pct(sampled, floor)} (medians of rounds)`,
    );
    const tripRatios = bare.map((b, i) => trip[i]!.rps / b.rps);
    console.log(
      `  round trip alone:       bare + one no-op EVALSHA per request / bare ${(median(tripRatios) * 100).toFixed(1)} % (${tripRatios.map((r) => (r * 100).toFixed(0)).join(', ')} %)`,
    );
  } finally {
    agent.destroy();
    admin.disconnect();
    const stopped = new Promise((resolve) => worker.once('message', resolve));
    worker.postMessage('stop');
    await Promise.race([stopped, new Promise((r) => setTimeout(r, 5000))]);
    await worker.terminate();
    await redis.stop();
    sink.stop();
  }
}

if (!isMainThread) await serve(workerData as ServerInit);
