import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/local-redis.js';
import { redisUrl, testPrefix } from './helpers/redis.js';

interface Proc {
  exit: Promise<number | null>;
  stdout: () => string;
  stderr: () => string;
  kill: (signal: NodeJS.Signals) => void;
}

/** Runs `npm start`'s entry with the given environment (nothing inherited but PATH). */
function startCli(env: Record<string, string>, args: string[] = []): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'app/cli.ts', ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return {
    exit: new Promise((r) => child.once('exit', (code) => r(code))),
    stdout: () => out,
    stderr: () => err,
    kill: (s) => child.kill(s),
  };
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
      const lines = proc.stdout().trim().split('\n').map((l) => JSON.parse(l) as { msg: string });
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['steerbot starting', 'steerbot started', 'shutting down', 'stopped']));
      expect(proc.stdout()).not.toContain('sk-should-never-be-logged');
    }, 60_000);
  }
});
