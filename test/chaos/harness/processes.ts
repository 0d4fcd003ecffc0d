/**
 * steerbot processes for the chaos suite, started as an operator starts them:
 * `node dist/app/cli.js start --config <file>` (the package built once for
 * the lane, `test/helpers/built-package.ts`: a process starts without
 * compiling TypeScript, so kills and replacements come quickly) with settings
 * in the environment, each on its own loopback port, ready once its
 * `/readyz` answers 200 (Redis, the runner's worker and the channels all
 * ready). The runner plugin is TypeScript that Node runs as it is (its
 * imports of the sources are types only).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../src/redis/local.js';
import type { CallbackServer } from '../../../testing/fakes/webhook-callback-server.js';
import { builtCli } from '../../helpers/built-package.js';
import type { PrivateServers } from '../../helpers/private-servers.js';

/** The suite's runner plugin module (absolute path: the CLI resolves relative ones against its working directory). */
export const CHAOS_AGENT = fileURLToPath(new URL('../fixtures/chaos-agent.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Children still running; killed if the test process exits without stopping them (a crashed or timed-out worker). */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Which roles a process plays. */
export type Role = 'host' | 'runner' | 'both';

/** A started steerbot process. */
export interface SteerbotProcess {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** `http://127.0.0.1:<port>`: ingress for a host, probes for a runner-only process. */
  url: string;
  /** Whether it has exited. */
  readonly exited: boolean;
  /** Exit code or signal once exited. */
  exitStatus(): string | undefined;
  /** The last lines it wrote (stdout and stderr). */
  output(): string;
  /** `kill -9`; resolves once it has exited. */
  kill9(): Promise<void>;
  /** SIGTERM (a clean stop), SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/** Settings of one process. */
export interface ProcessSettings {
  name: string;
  role: Role;
  redisUrl: string;
  prefix: string;
  /** The JSON config file (channels). */
  configFile: string;
  /** More environment variables (lease, agent settings, …). */
  env?: Record<string, string>;
  /** How long to wait for `/readyz`, in ms. Default 60 000 (a loaded 2-core machine compiles TypeScript slowly). */
  readyTimeoutMs?: number;
  /** The CLI to run with tsx, e.g. an earlier release's `dist/app/cli.js`. Default: this checkout's built `dist/app/cli.js`, without tsx. */
  cli?: string;
}

/**
 * Starts one process and resolves once its `/readyz` answers 200. A port found
 * free can be taken (by another test's process, or as the local port of an
 * outgoing connection) before the child listens on it: then it starts again on another.
 */
export async function startSteerbot(s: ProcessSettings): Promise<SteerbotProcess> {
  const node = s.cli ? ['--import', 'tsx', s.cli] : [await builtCli()];
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(s, node, await freePort());
    } catch (err) {
      if (attempt >= 3 || !(err instanceof PortTakenError)) throw err;
    }
  }
}

/** The child could not listen: its port was taken meanwhile. */
class PortTakenError extends Error {}

/** `node` gets `nodeArgs` (the CLI and how to load it), then the command line. */
async function startOnce(s: ProcessSettings, nodeArgs: string[], port: number): Promise<SteerbotProcess> {
  const url = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    REDIS_URL: s.redisUrl,
    STEERBOT_PREFIX: s.prefix,
    STEERBOT_QUEUE_NAME: `runs-${s.prefix}`,
    STEERBOT_HOST: String(s.role !== 'runner'),
    STEERBOT_RUNNER: String(s.role !== 'host'),
    STEERBOT_RUNNER_PLUGIN: CHAOS_AGENT,
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
    LOG_FORMAT: 'json',
    ...s.env,
  };
  const proc = spawn(process.execPath, [...nodeArgs, 'start', '--config', s.configFile], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let exited = false;
  live.add(proc);
  const exit = new Promise<void>((resolve) =>
    proc.once('exit', () => {
      exited = true;
      live.delete(proc);
      resolve();
    }),
  );
  let tail = '';
  const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-20_000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const signal = async (sig: NodeJS.Signals, graceMs?: number) => {
    if (!exited) proc.kill(sig);
    const timer = graceMs === undefined ? undefined : setTimeout(() => proc.kill('SIGKILL'), graceMs);
    await exit;
    clearTimeout(timer);
  };
  const started: SteerbotProcess = {
    name: s.name,
    proc,
    pid: proc.pid!,
    url,
    get exited() {
      return exited;
    },
    exitStatus: () => (exited ? String(proc.exitCode ?? proc.signalCode) : undefined),
    output: () => tail,
    kill9: () => signal('SIGKILL'),
    stop: (graceMs = 15_000) => signal('SIGTERM', graceMs),
  };
  const timeoutMs = s.readyTimeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited) {
      if (tail.includes('EADDRINUSE')) throw new PortTakenError(`${s.name}: port ${port} taken before it listened`);
      throw new Error(`${s.name} exited (${started.exitStatus()}) before it was ready:\n${tail}`);
    }
    if (await ready(url)) return started;
    if (Date.now() > deadline) {
      await started.kill9();
      throw new Error(`${s.name} not ready within ${timeoutMs} ms:\n${tail}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `/readyz` answers 200. */
export async function ready(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** A temporary directory holding the suite's config file; `remove()` deletes it. */
export async function writeConfig(config: Record<string, unknown>): Promise<{ file: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'steerbot-chaos-'));
  const file = join(dir, 'steerbot.json');
  await writeFile(file, JSON.stringify(config, null, 2));
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** Stops every process still running (SIGKILL: the Redis they share is about to go). */
export async function killAll(procs: Iterable<SteerbotProcess>): Promise<void> {
  await Promise.all([...procs].map((p) => p.kill9()));
}

/** What a chaos suite's `beforeAll` started; any part is missing when it failed before starting it. */
export interface SuiteParts {
  procs: Iterable<SteerbotProcess>;
  callbacks?: CallbackServer;
  servers?: PrivateServers;
  config?: { remove(): Promise<void> };
}

/** Tears a suite down: its processes first (SIGKILL), then the callback receiver, the servers, the config file. */
export async function tearDownSuite(s: SuiteParts): Promise<void> {
  await killAll(s.procs);
  await s.callbacks?.close();
  await s.servers?.stop();
  await s.config?.remove();
}
