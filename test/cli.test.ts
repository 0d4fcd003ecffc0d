import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/redis/local.js';
import { BUILD_WAIT_MS, builtCli } from './helpers/built-package.js';
import { spawnCaptured } from './helpers/cli.js';
import { redisUrl, testPrefix } from './helpers/redis.js';

interface Proc {
  exit: Promise<number | null>;
  stdout: () => string;
  stderr: () => string;
  kill: (signal: NodeJS.Signals) => void;
}

/** Runs `npm start`'s entry (dist/app/cli.js) with the given environment (nothing inherited but PATH). */
function startCli(env: Record<string, string>, args: string[] = []): Proc {
  const run = spawnCaptured([cliJs, ...args], env);
  return { exit: run.exited, stdout: run.stdout, stderr: run.stderr, kill: (s) => run.child.kill(s) };
}

async function waitForHealthy(url: string, deadlineMs: number, proc: Proc): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`not healthy in time; stderr:\n${proc.stderr()}\nstdout:\n${proc.stdout()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let cliJs = '';
// The CLI as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(async () => void (cliJs = await builtCli()), BUILD_WAIT_MS);

describe('cli', () => {
  it('exits 2 naming every bad setting', async () => {
    const proc = startCli({ PORT: 'abc', STEERBOT_DEFAULT_POLICY: 'nope' });
    expect(await proc.exit).toBe(2);
    expect(proc.stderr()).toContain('http.port: expected an integer (env PORT="abc")');
    expect(proc.stderr()).toContain('dispatch.defaultPolicy');
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`serves /healthz and exits 0 on ${signal}`, async () => {
      const port = await freePort();
      const proc = startCli({
        REDIS_URL: redisUrl(),
        PORT: String(port),
        HOST: '127.0.0.1',
        STEERBOT_PREFIX: testPrefix(),
        OPENAI_API_KEY: 'sk-should-never-be-logged',
      });
      try {
        await waitForHealthy(`http://127.0.0.1:${port}/healthz`, 40_000, proc);
      } catch (err) {
        proc.kill('SIGKILL');
        throw err;
      }
      proc.kill(signal);
      expect(await proc.exit).toBe(0);
      const lines = proc
        .stdout()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['steerbot starting', 'steerbot started', 'shutting down', 'stopped']));
      expect(proc.stdout()).not.toContain('sk-should-never-be-logged');
      const steps = lines.find((l) => l.msg === 'next steps') as unknown as { steps: string[] };
      expect(steps.steps).toEqual(
        expect.arrayContaining([
          `  http:     http://127.0.0.1:${port} (health: http://127.0.0.1:${port}/healthz)`,
          '  channels: web',
          '  model:    openai gpt-4o-mini',
          `  chat:     http://127.0.0.1:${port}/ (private: log in with the link printed at start; it changes at every start)`,
        ]),
      );
      // The one-time login link goes to stderr, never into the JSON log lines on stdout.
      const login = /http:\/\/127\.0\.0\.1:\d+\/console\?token=([A-Za-z0-9_-]+)/.exec(proc.stderr());
      expect(login).not.toBeNull();
      expect(proc.stdout()).not.toContain(login![1]);
      expect(steps.steps.join('\n')).toContain('next: chat on the page above; for a platform, set TELEGRAM_BOT_TOKEN');
    }, 60_000);
  }

  describe('check-config', () => {
    it('prints the effective configuration with every secret redacted, and exits 0', async () => {
      const proc = startCli(
        {
          OPENAI_API_KEY: 'sk-check-config-secret',
          TELEGRAM_BOT_TOKEN: '123456:tg-check-config-secret',
          REDIS_URL: 'redis://:redis-pass-123@db:6379',
          PORT: '9090',
        },
        ['check-config'],
      );
      expect(await proc.exit).toBe(0);
      const printed = JSON.parse(proc.stdout()) as {
        http: { port: number };
        model: { apiKey: string };
        channels: { telegram: { token: string } };
        redis: { url: string };
      };
      expect(printed.http.port).toBe(9090);
      expect(printed.model.apiKey).toBe('[set]');
      expect(printed.channels.telegram.token).toBe('[set]');
      expect(printed.redis.url).toContain('db:6379');
      for (const secret of ['sk-check-config-secret', 'tg-check-config-secret', 'redis-pass-123']) expect(proc.stdout() + proc.stderr()).not.toContain(secret);
    });

    it('says that the window of a model the catalogue does not know is discovered when the runner starts', async () => {
      const proc = startCli({ STEERBOT_MODEL_PROVIDER: 'openai-compatible', OPENAI_BASE_URL: 'http://localhost:11434/v1', STEERBOT_MODEL: 'llama3.1:8b' }, [
        'check-config',
      ]);
      expect(await proc.exit).toBe(0);
      expect((JSON.parse(proc.stdout()) as { model: unknown }).model).toMatchObject({ name: 'llama3.1:8b', discoverWindow: true });
      expect(proc.stderr()).toContain(
        'steerbot: model: the context window of "llama3.1:8b" is discovered when the runner starts (http://localhost:11434/v1/models, else Ollama\'s /api/show); set model.contextWindow to skip it',
      );
    });

    it('exits 2 naming every bad field of a --config file and the environment', async () => {
      const { mkdtempSync, writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      const { tmpdir } = await import('node:os');
      const file = join(mkdtempSync(join(tmpdir(), 'steerbot-cli-')), 'steerbot.json');
      writeFileSync(file, JSON.stringify({ runs: { leaseMs: 10 }, agents: { 'local-agent': { maxSteps: 0 } } }));
      const proc = startCli({ PORT: 'abc' }, ['check-config', '--config', file]);
      expect(await proc.exit).toBe(2);
      expect(proc.stderr()).toContain('runs.leaseMs');
      expect(proc.stderr()).toContain('agents.local-agent.maxSteps');
      expect(proc.stderr()).toContain('http.port: expected an integer (env PORT="abc")');
    });

    it('refuses an unknown command with the usage and exit 2', async () => {
      const proc = startCli({}, ['launch']);
      expect(await proc.exit).toBe(2);
      expect(proc.stderr()).toContain(
        'usage: steerbot [start | check-config | pair <code> | revoke-token <name> | skills list | export (--conversation <id> | --identity <id>)] [--config file]',
      );
      expect(proc.stderr()).toContain('export         write everything stored for a conversation (--conversation <id>) or a person');
    });
  });
});
