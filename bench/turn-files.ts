/**
 * `npm run bench -- turn-files`: which of steerbot's own files and Redis
 * scripts one turn passes through, read from the running code rather than the
 * imports. One steerbot process (host and runner, the compiled dist/, as
 * `npm start` runs) on a private Redis answers BENCH_WARMUP (default 5)
 * messages of one conversation, then one more: V8's coverage counters
 * (NODE_V8_COVERAGE) are reset right before that message is POSTed and read
 * once its reply arrived and its run ended, and every source file with a
 * function that ran in between is listed; MONITOR names the scripts the turn
 * ran. BENCH_CHANNEL: `webhook` (signed webhooks, the default) or `telegram`
 * (webhook mode, against a fake Bot API). Background timers that fire in the
 * window (lease heartbeats, the queue's own polling) count too: they are part
 * of a turn.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { takeCoverage } from 'node:v8';
import { Redis } from 'ioredis';
import { signedHeaders } from '../plugins/webhook/signature.js';
import { bullPrefixFor } from '../src/protocol/run-queue.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { messageUpdate, startFakeTelegram } from '../testing/fakes/telegram-server.js';
import { privateRedis } from './private-redis.js';
import { appProcess, ask, freePort, spawnRole, stopAll, TELEGRAM_SECRET, WEBHOOK_PATH, WEBHOOK_SECRET } from './processes.js';
import { monitorCommands, scriptNames } from './redis-stages.js';

const WARMUP = Number(process.env.BENCH_WARMUP ?? 5);
const CHANNEL = process.env.BENCH_CHANNEL === 'telegram' ? 'telegram' : 'webhook';
const ROOT = fileURLToPath(new URL('..', import.meta.url));

export async function main(): Promise<void> {
  if (process.env.BENCH_ROLE === 'app') return appProcess(coverageNow);
  await orchestrate();
}

/** The app's side of `'coverage'`: writes the counters so far and resets them. */
function coverageNow(message: string): { covered: true } | undefined {
  if (message !== 'coverage') return undefined;
  takeCoverage();
  return { covered: true };
}

/** V8's block coverage of one script, as NODE_V8_COVERAGE writes it. */
interface ScriptCoverage {
  url: string;
  functions: Array<{ functionName: string; ranges: Array<{ count: number }> }>;
}

async function orchestrate(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const coverageDir = mkdtempSync(join(tmpdir(), 'steerbot-turn-files-'));
  const prefix = `tf${Date.now().toString(36)}`;
  const model = await startFakeOpenAI();
  model.script(() => ({ text: 'Noted, thanks.' }));
  const telegram = await startFakeTelegram();
  let replies = 0;
  const receiver = createServer((req, res) => {
    req.resume().on('end', () => {
      replies++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = await freePort();
  const app = spawnRole('turn-files', 'app', { NODE_V8_COVERAGE: coverageDir });
  try {
    await ask(app, 'started', {
      start: {
        redisEnv: { REDIS_URL: redis.url },
        prefix,
        host: true,
        runner: true,
        concurrency: 4,
        port,
        modelUrl: model.url,
        callbackUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callbacks`,
        ...(CHANNEL === 'telegram' && { telegramApiRoot: telegram.apiRoot }),
      },
    });
    const answered = () => (CHANNEL === 'telegram' ? telegram.calls.filter((c) => c.method === 'sendMessage').length : replies);
    const conversation = CHANNEL === 'telegram' ? 'telegram:4242' : 'webhook:e2e:c0';
    const activeKey = `${prefix}:{c:${conversation}}:active`;
    const turn = async (n: number) => {
      const before = answered();
      await post(port, n);
      await until(async () => answered() > before && (await client.exists(activeKey)) === 0, `the reply to message ${n}`);
    };
    for (let n = 0; n < WARMUP; n++) await turn(n);

    const names = scriptNames();
    const monitor = await monitorCommands(redis.url, names, { prefix, bullPrefix: bullPrefixFor(prefix) });
    await ask(app, 'covered', 'coverage');
    const seen = new Set(readdirSync(coverageDir));
    await turn(WARMUP);
    await ask(app, 'covered', 'coverage');
    const tally = await monitor.stop();
    const file = readdirSync(coverageDir).find((f) => !seen.has(f));
    if (!file) throw new Error('bench: no coverage was written for the measured turn');
    report(JSON.parse(readFileSync(join(coverageDir, file), 'utf8')).result as ScriptCoverage[], tally, new Set(names.values()));
  } finally {
    await stopAll([app]);
    client.disconnect();
    receiver.close();
    await Promise.all([model.close(), telegram.close(), redis.stop()]);
    rmSync(coverageDir, { recursive: true, force: true });
  }
}

/** POSTs message `n` of the one conversation, signed (webhook) or as a Telegram update. */
async function post(port: number, n: number): Promise<void> {
  const text = `message ${n}: the quick brown fox`;
  const raw =
    CHANNEL === 'telegram'
      ? JSON.stringify(messageUpdate({ from: { id: 4242, is_bot: false, first_name: 'Ann' }, text }))
      : JSON.stringify({ id: `m-${n}`, conversation: 'c0', sender: { id: 'u0', name: 'Ann' }, text });
  const headers =
    CHANNEL === 'telegram'
      ? { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': TELEGRAM_SECRET }
      : { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) };
  const res = await fetch(`http://127.0.0.1:${port}${CHANNEL === 'telegram' ? '/telegram/webhook' : WEBHOOK_PATH}`, { method: 'POST', headers, body: raw });
  if (res.status !== 200 && res.status !== 202) throw new Error(`bench: message ${n} got HTTP ${res.status}`);
}

async function until(done: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`bench: waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Prints steerbot's own source files that ran (by folder), the dependencies' count, and the scripts by owner. */
function report(scripts: ScriptCoverage[], tally: Map<string, { calls: number }>, scriptLabels: Set<string>): void {
  const ran = (s: ScriptCoverage) => s.functions.some((f) => (f.ranges[0]?.count ?? 0) > 0);
  const own: string[] = [];
  const packages = new Set<string>();
  for (const s of scripts.filter(ran)) {
    if (!s.url.startsWith('file://')) continue;
    const path = fileURLToPath(s.url);
    const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
    if (dep) packages.add(dep[1]!);
    else if (path.startsWith(join(ROOT, 'dist'))) own.push(relative(join(ROOT, 'dist'), path).replace(/\.js$/, '.ts'));
  }
  own.sort();
  const byFolder = new Map<string, number>();
  for (const f of own) byFolder.set(f.split('/')[0]!, (byFolder.get(f.split('/')[0]!) ?? 0) + 1);
  const ranScripts = [...tally.entries()].filter(([label]) => scriptLabels.has(label)).map(([label, t]) => `${label} ×${t.calls}`);
  const core = ranScripts.filter((s) => !s.startsWith('bullmq ') && !s.includes('/'));
  console.log(`\nturn-files (${CHANNEL} channel, after ${WARMUP} warm-up turns of the same conversation)`);
  console.log(`steerbot files that ran: ${own.length} (${[...byFolder].map(([d, n]) => `${d} ${n}`).join(', ')})`);
  for (const f of own) console.log(`  ${f}`);
  console.log(
    `steerbot scripts: ${core.length} (${core.join(', ')}); plugin scripts: ${ranScripts.filter((s) => !s.startsWith('bullmq ') && s.includes('/')).join(', ') || 'none'}`,
  );
  console.log(`BullMQ scripts: ${ranScripts.filter((s) => s.startsWith('bullmq ')).join(', ')}`);
  console.log(`dependency packages that ran: ${packages.size} (${[...packages].sort().join(', ')})`);
}
