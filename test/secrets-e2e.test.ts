/**
 * Secrets never reach the output of a real steerbot process: each failure
 * path that carries a credential (a wrong Redis password at startup, a bad
 * Telegram token, a bad model API key, a webhook callback URL with
 * credentials) is provoked with distinctive values, at log level `trace`,
 * and all of the child's stdout and stderr is searched for them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../plugins/webhook/signature.js';
import { createRedis } from '../src/redis/connection.js';
import { freePort } from '../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { type FakeTelegram, startFakeTelegram } from '../testing/fakes/telegram-server.js';
import { type CallbackServer, startCallbackServer } from '../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../testing/wait.js';
import { BUILD_WAIT_MS, builtCli } from './helpers/built-package.js';
import { redisUrl, testPrefix } from './helpers/redis.js';

// Distinctive values no pattern-based redaction recognises: only the configured-secret paths can remove them.
const REDIS_PASSWORD = 'RedisPw-Distinct-82kq';
const REDIS_URL_PASSWORD = 'UrlPw-Distinct-31zv';
const MODEL_KEY = 'ModelKey-Distinct-5521xq';
const WEBHOOK_SECRET = 'WhSecret-Distinct-0042abc';
const CALLBACK_PASSWORD = 'CbPw-Distinct-93qq';
const CALLBACK_USER = 'CbUser-Distinct-17';
const TELEGRAM_TOKEN = '7999999999:AAdistinctBadTgToken_q1w2e3r4t5y6u7i8o9';

interface Child {
  proc: ChildProcess;
  /** stdout and stderr so far. */
  output: () => string;
  exit: Promise<number | null>;
}

/** Starts the `steerbot` command (dist/app/cli.js) with only `env` (and PATH). */
function startCli(env: Record<string, string>, args: string[] = []): Child {
  const proc = spawn(process.execPath, [cliJs, ...args], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'trace', LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { proc, output: () => out, exit: new Promise((r) => proc.once('exit', (code) => r(code))) };
}

/** Ends the child (SIGKILL after 10 s of SIGTERM) and returns all it wrote. */
async function finish(child: Child): Promise<string> {
  if (child.proc.exitCode === null && child.proc.signalCode === null) {
    child.proc.kill('SIGTERM');
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
    await child.exit;
    clearTimeout(timer);
  }
  return child.output();
}

function expectNoSecrets(output: string, secrets: string[]): void {
  for (const s of secrets) {
    expect(output, `output contains ${s}`).not.toContain(s);
    expect(output, `output contains ${s} (URL-encoded)`).not.toContain(encodeURIComponent(s));
  }
}

/** A redis-server with `requirepass`, ready when it answers PING with the right password. */
async function redisWithPassword(dir: string, password: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--requirepass', password],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  const probe = new Redis({ port, host: '127.0.0.1', password, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  probe.on('error', () => undefined);
  await waitFor(
    async () =>
      (await probe.connect().then(
        () => probe.ping(),
        () => undefined,
      )) === 'PONG' || undefined,
    10_000,
    'redis-server with a password',
  );
  probe.disconnect();
  return {
    port,
    stop: async () => {
      server.kill('SIGTERM');
      await exited;
    },
  };
}

let cliJs = '';
// The CLI as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(async () => void (cliJs = await builtCli()), BUILD_WAIT_MS);

describe('secrets in the output of a real process', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'steerbot-secrets-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a wrong Redis password at startup is not logged, nor the one in the URL', async () => {
    const redis = await redisWithPassword(dir, 'the-right-password-1234');
    try {
      const child = startCli({
        REDIS_URL: `redis://steerbot:${REDIS_URL_PASSWORD}@127.0.0.1:${redis.port}`,
        REDIS_PASSWORD,
        PORT: String(await freePort()),
        HOST: '127.0.0.1',
        STEERBOT_PREFIX: testPrefix(),
      });
      await waitFor(() => child.output().includes('WRONGPASS') || undefined, 30_000, `WRONGPASS in the output:\n${child.output()}`).catch(async (err) => {
        await finish(child);
        throw err;
      });
      const output = await finish(child);
      expect(output).toContain('WRONGPASS');
      expectNoSecrets(output, [REDIS_PASSWORD, REDIS_URL_PASSWORD]);
    } finally {
      await redis.stop();
    }
  }, 60_000);

  it('the configured Redis password wins over the one in the URL', async () => {
    const redis = await redisWithPassword(dir, 'the-right-password-5678');
    try {
      for (const url of [`redis://default:${REDIS_URL_PASSWORD}@127.0.0.1:${redis.port}`, `redis://:${REDIS_URL_PASSWORD}@127.0.0.1:${redis.port}/0`]) {
        const client = createRedis({ url, password: 'the-right-password-5678' });
        client.on('error', () => undefined);
        try {
          expect(await client.ping()).toBe('PONG');
        } finally {
          client.disconnect();
        }
      }
    } finally {
      await redis.stop();
    }
  });

  describe('with Telegram and a model that refuse the credentials, and a webhook whose callback URL has credentials', () => {
    let telegram: FakeTelegram;
    let openai: FakeOpenAIServer;
    let callbacks: CallbackServer;
    beforeAll(async () => {
      telegram = await startFakeTelegram();
      openai = await startFakeOpenAI({ apiKey: 'the-right-model-key' });
      callbacks = await startCallbackServer(WEBHOOK_SECRET);
    });
    afterAll(async () => {
      await Promise.all([telegram.close(), openai.close(), callbacks.close()]);
    });

    it('a Telegram token refused with 401 is not logged', async () => {
      const child = startCli({
        REDIS_URL: redisUrl(),
        TELEGRAM_BOT_TOKEN: TELEGRAM_TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        PORT: String(await freePort()),
        HOST: '127.0.0.1',
        STEERBOT_PREFIX: testPrefix(),
        STEERBOT_RUNNER: 'false',
      });
      expect(await child.exit).not.toBe(0);
      const output = child.output();
      expect(telegram.callsOf('getMe').map((c) => c.outcome)).toContain(401);
      expect(output).toMatch(/401/);
      expectNoSecrets(output, [TELEGRAM_TOKEN, TELEGRAM_TOKEN.split(':')[1]!]);
    }, 60_000);

    it('a model API key refused with 401 and a callback URL password are not logged', async () => {
      const port = await freePort();
      const callbackUrl = new URL(callbacks.url);
      callbackUrl.username = CALLBACK_USER;
      callbackUrl.password = CALLBACK_PASSWORD;
      const file = join(dir, 'config.json');
      await writeFile(
        file,
        JSON.stringify({
          channels: { webhooks: { e2e: { secret: WEBHOOK_SECRET, callbackUrl: callbackUrl.toString(), callbackRetryBaseMs: 10, callbackMaxAttempts: 3 } } },
        }),
      );
      // The first callback attempts fail: their errors and retries are logged.
      callbacks.failNext({ status: 500 }, { status: 503 });
      const prefix = testPrefix();
      const child = startCli({
        STEERBOT_CONFIG: file,
        REDIS_URL: redisUrl(),
        PORT: String(port),
        HOST: '127.0.0.1',
        STEERBOT_PREFIX: prefix,
        STEERBOT_QUEUE_NAME: `runs-${prefix}`,
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: openai.url,
        OPENAI_API_KEY: MODEL_KEY,
        STEERBOT_MODEL: 'fake-model',
        STEERBOT_MODEL_CONTEXT_WINDOW: '128000', // 'fake-model' is not in the model catalogue
      });
      try {
        await waitFor(
          async () =>
            (await fetch(`http://127.0.0.1:${port}/healthz`).then(
              (r) => r.status,
              () => 0,
            )) === 200 || undefined,
          40_000,
          `healthy:\n${child.output()}`,
        );
        const raw = JSON.stringify({ id: 'm-1', conversation: 'c-1', sender: { id: 'ann' }, text: 'hello' });
        const res = await fetch(`http://127.0.0.1:${port}/webhooks/e2e`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...signedHeaders(WEBHOOK_SECRET, raw) },
          body: raw,
        });
        expect(res.status).toBe(202);
        // The model refused the key (the run failed), and the failure notice got through on the third callback.
        await openai.waitForRequests(1, 20_000);
        await callbacks.waitForAccepted(1, 30_000);
      } finally {
        await finish(child);
      }
      const output = child.output();
      expect(callbacks.requests.map((r) => r.status)).toEqual([500, 503, 200]);
      // The credentials of the callback URL went as Basic auth (fetch refuses a URL that carries them).
      expect(callbacks.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from(`${CALLBACK_USER}:${CALLBACK_PASSWORD}`).toString('base64')}`);
      expect(output).toMatch(/invalid_api_key|Incorrect API key|401/);
      expectNoSecrets(output, [MODEL_KEY, WEBHOOK_SECRET, CALLBACK_PASSWORD]);
    }, 90_000);
  });
});
