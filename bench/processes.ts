/**
 * What the benches that run steerbot as separate processes share: a child
 * process per steerbot process (host, runner or both) started over IPC, its
 * configuration (a signed webhook channel calling back to the bench, the local
 * agent on a fake OpenAI-compatible model), and the measuring helpers (CPU
 * from /proc, free ports, percentiles).
 */
import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { readConfig } from '../app/config.js';
import { startApp } from '../app/start.js';
import { telegramConfigSchema } from '../plugins/telegram/config.js';
import { webhookChannelConfigSchema } from '../plugins/webhook/config.js';
import { FAKE_TOKEN } from '../testing/fakes/telegram-server.js';

/** The webhook channel's secret (signs POSTs and callbacks). */
export const WEBHOOK_SECRET = 'bench-e2e-secret-0123456789abcdef';
/** The Telegram webhook secret token. */
export const TELEGRAM_SECRET = 'bench-e2e-telegram-secret';
/** The webhook channel's name: POSTs go to `/webhooks/e2e`, conversations are `webhook:e2e:<name>`. */
export const WEBHOOK_PATH = '/webhooks/e2e';

/** What one steerbot process runs. */
export interface AppSpec {
  /** Redis settings as environment variables (`REDIS_URL`, or `REDIS_MODE` and `REDIS_CLUSTER_NODES`). */
  redisEnv: Record<string, string>;
  prefix: string;
  host: boolean;
  runner: boolean;
  concurrency: number;
  port: number;
  modelUrl: string;
  callbackUrl: string;
  /** With a fake Bot API: the Telegram channel (webhook mode) instead of the webhook channel. */
  telegramApiRoot?: string;
}

type AppIn = { start: AppSpec } | 'stop' | string;

export const nowMs = () => performance.timeOrigin + performance.now();

/**
 * The child's side: starts steerbot with the spec it is sent, answers
 * `{ started: { address } }`, stops on `'stop'`. `extra` answers any other
 * string message (the e2e bench's `'spans'`).
 */
export function appProcess(extra?: (message: string) => unknown): void {
  let app: Awaited<ReturnType<typeof startApp>> | undefined;
  process.on('message', async (m: AppIn) => {
    if (m === 'stop') {
      await app?.stop();
      process.exit(0);
    }
    if (typeof m === 'string') {
      process.send!(extra?.(m));
      return;
    }
    const start: typeof startApp = process.env.BENCH_APP !== 'src' ? (await import(new URL('../dist/app/start.js', import.meta.url).href)).startApp : startApp;
    app = await start({ config: appConfig(m.start), dataDir: '.steerbot/e2e-unused' });
    process.send!({ started: { address: app.address } });
  });
}

function appConfig(s: AppSpec) {
  const base = readConfig({
    env: {
      ...s.redisEnv,
      STEERBOT_PREFIX: s.prefix,
      STEERBOT_QUEUE_NAME: `runs-${s.prefix}`,
      HOST: '127.0.0.1',
      PORT: String(s.port),
      LOG_LEVEL: 'silent',
      STEERBOT_RUNNER_CONCURRENCY: String(s.concurrency),
      STEERBOT_MODEL: 'm',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000',
      OPENAI_API_KEY: 'k',
      OPENAI_BASE_URL: s.modelUrl,
    },
  });
  const webhooks = { e2e: webhookChannelConfigSchema.parse({ secret: WEBHOOK_SECRET, callbackUrl: s.callbackUrl, maxSkewSeconds: 3600 }) };
  const telegram =
    s.telegramApiRoot === undefined
      ? undefined
      : telegramConfigSchema.parse({ token: FAKE_TOKEN, apiRoot: s.telegramApiRoot, mode: 'webhook', webhookSecret: TELEGRAM_SECRET, registerCommands: false });
  return {
    ...base,
    host: { ...base.host, enabled: s.host },
    runner: { ...base.runner, enabled: s.runner },
    channels: telegram ? { telegram } : { webhooks },
  };
}

let built = false;

/** The steerbot processes run the compiled dist/ (what `npm start` runs), built first when stale; BENCH_APP=src: the sources, through tsx. */
function buildDistOnce(): void {
  if (built || process.env.BENCH_APP === 'src') return;
  const r = spawnSync(process.execPath, [fileURLToPath(new URL('../scripts/build.mjs', import.meta.url)), '--if-stale'], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('bench: building dist/ failed');
  built = true;
}

/**
 * Forks `npm run bench -- <bench>` again as a child with `BENCH_ROLE=<role>`
 * (and IPC). BENCH_CPU_PROF=<dir>: each steerbot process (role `app`) writes a
 * V8 CPU profile there when it stops.
 */
export function spawnRole(bench: string, role: string, env: Record<string, string> = {}): ChildProcess {
  if (role === 'app') buildDistOnce();
  const prof = process.env.BENCH_CPU_PROF;
  return fork(fileURLToPath(new URL('./index.ts', import.meta.url)), [bench], {
    env: { ...process.env, ...env, BENCH_ROLE: role },
    ...(prof && role === 'app' && { execArgv: [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${prof}`] }),
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
  });
}

/** Sends `message` (if any) and waits for the child's answer of `kind`. */
export function ask<K extends string>(child: ChildProcess, kind: K, message?: unknown): Promise<any> {
  return new Promise((resolve, reject) => {
    const onExit = () => reject(new Error(`a bench process exited while waiting for ${kind}`));
    const onMessage = (m: unknown) => {
      if (typeof m !== 'object' || m === null || !(kind in m)) return;
      child.off('message', onMessage).off('exit', onExit);
      resolve((m as Record<string, unknown>)[kind]);
    };
    child.on('message', onMessage).once('exit', onExit);
    if (message !== undefined) child.send(message as string);
  });
}

/** Asks every child to stop and waits until each has exited. */
export async function stopAll(children: ChildProcess[]): Promise<void> {
  await Promise.all(children.map((c) => ask(c, 'exit-never', 'stop').catch(() => undefined)));
}

/** CPU time (user + system) of a process so far, in ms (/proc; 0 where there is no /proc). */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0;
  }
}

export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

/** The `p`th percentile of ascending `sorted` (NaN when empty). */
export const pct = (sorted: number[], p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
