/**
 * steerbot as `steerbot start` runs it, for the http-agent end-to-end tests:
 * a config file selecting the http-agent runner and one signed webhook
 * channel calling back to a local receiver, environment on top, started by
 * `startApp` (in this process) or by `runner-child.ts` (a runner-only child
 * process the tests kill).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { signedHeaders } from '../../src/http/signature.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import type { RecordEntry, SeqEntry } from '../../src/record/entries.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { readyLine } from '../helpers/child-ready.js';
import { cleanupPrefix, redisUrl } from '../helpers/redis.js';
import { SECRET } from './helpers.js';

export const WEBHOOK_SECRET = 'whsec-http-agent-0123456789';
export const CONVERSATION = 'ticket-7';
export const CID = `webhook:e2e:${CONVERSATION}`;

/** Writes the config file both processes read. */
export function writeConfig(dir: string, o: { agentUrl: string; callbackUrl: string }): string {
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      runner: { plugin: 'http-agent' },
      agents: { 'http-agent': { url: o.agentUrl, secret: SECRET } },
      channels: { webhooks: { e2e: { secret: WEBHOOK_SECRET, callbackUrl: o.callbackUrl, callbackRetryBaseMs: 10 } } },
    }),
  );
  return file;
}

/** The environment of every process of one test (one prefix, one queue, short leases). */
export function systemEnv(prefix: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: redisUrl(),
    STEERBOT_PREFIX: prefix,
    STEERBOT_QUEUE_NAME: `runs-${prefix}`,
    STEERBOT_LEASE_MS: '1500',
    STEERBOT_HEARTBEAT_MS: '300',
    STEERBOT_RUNNER_SHUTDOWN_GRACE_MS: '500',
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...extra,
  };
}

/** A started in-process steerbot and what the tests do with it. */
export interface System {
  app: RunningApp;
  prefix: string;
  /** POSTs a signed webhook message. */
  post(id: string, text: string): Promise<{ status: number; body: Record<string, any> }>;
  record(): Promise<SeqEntry[]>;
  entries<K extends RecordEntry['kind']>(kind: K): Promise<Array<SeqEntry<Extract<RecordEntry, { kind: K }>>>>;
  stop(): Promise<void>;
}

/** Starts steerbot from the config file and `env`. */
export async function startSystem(file: string, env: Record<string, string>): Promise<System> {
  const loaded = await loadConfig({ file, env });
  const config = { ...loaded, http: { ...loaded.http, port: 0 } }; // any free port (a config cannot ask for 0)
  const app = await startApp({ config, logger: createLogger({ level: config.log.level }) });
  const prefix = config.redis.prefix;
  const record = () => readRange(app.ctx.redis, conversationKeys(prefix, CID).log);
  return {
    app,
    prefix,
    async post(id, text) {
      const raw = JSON.stringify({ id, conversation: CONVERSATION, sender: { id: 'ann', name: 'Ann' }, text });
      const res = await fetch(`${app.address}/webhooks/e2e`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) },
        body: raw,
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    },
    record,
    async entries(kind) {
      return (await record()).filter((e) => e.kind === kind) as never;
    },
    async stop() {
      await cleanupPrefix(app.ctx.redis, prefix);
      await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix));
      await app.stop();
    },
  };
}

const CHILD = fileURLToPath(new URL('./runner-child.ts', import.meta.url));

/** A runner-only steerbot in a child process. */
export interface RunnerChild {
  proc: ChildProcess;
  /** Where it serves its run endpoints (and probes). */
  address: string;
  kill9(): Promise<void>;
}

/** Spawns a runner-only steerbot (same config file, `env` with STEERBOT_HOST=false) and waits for it to run. */
export async function startRunnerChild(file: string, env: Record<string, string>): Promise<RunnerChild> {
  const proc = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, ...env, STEERBOT_HOST: 'false', STEERBOT_CONFIG: file },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exit = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const address = await readyLine(proc, 'runner child');
  return {
    proc,
    address,
    async kill9() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exit;
    },
  };
}
