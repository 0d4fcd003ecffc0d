/**
 * `npm start` as a person runs it, for the channels' start tests: the real
 * CLI in a child process on a free port and a fresh prefix, the model the
 * fake OpenAI-compatible server at `modelUrl`, the channel's variables in
 * `env`; resolved once its start summary is printed.
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from '../../src/redis/local.js';
import { waitFor } from '../../testing/wait.js';
import { builtCli } from '../helpers/built-package.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

/** The started process. */
export interface StartedSteerbot {
  port: number;
  /** The "next steps" lines of its start summary. */
  steps: string[];
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Stops it (SIGTERM), waits for its exit, and deletes its keys; its exit code. */
  stop(): Promise<number | null>;
}

/** Starts `dist/app/cli.js` (npm start's entry; the package built once for the lane) with `env` beside the common settings and waits for its start summary (40 s). */
export async function startSteerbot(modelUrl: string, env: Record<string, string>): Promise<StartedSteerbot> {
  const prefix = testPrefix();
  const port = await freePort();
  const child = spawn(process.execPath, [await builtCli()], {
    env: {
      PATH: process.env.PATH ?? '',
      REDIS_URL: redisUrl(),
      STEERBOT_PREFIX: prefix,
      HOST: '127.0.0.1',
      PORT: String(port),
      STEERBOT_MODEL_PROVIDER: 'openai-compatible',
      OPENAI_BASE_URL: modelUrl,
      STEERBOT_MODEL: 'fake-model',
      STEERBOT_MODEL_CONTEXT_WINDOW: '128000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async () => {
    child.kill('SIGTERM');
    const code = await exit;
    const redis = new Redis(redisUrl());
    await cleanupPrefix(redis, prefix);
    await redis.quit();
    return code;
  };
  try {
    const steps = await waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`steerbot exited ${child.exitCode}:\n${out}`);
        const line = out.split('\n').find((l) => l.includes('"next steps"'));
        return line ? (JSON.parse(line) as { steps: string[] }).steps : undefined;
      },
      40_000,
      'the start summary',
    );
    return { port, steps, output: () => out, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
