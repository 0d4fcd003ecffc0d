/**
 * `npm start` with the Matrix variables: the real process starts the
 * channel, its start summary lists it, and a message in a room of the fake
 * homeserver is answered there (model: the fake OpenAI-compatible server).
 * The access token reaches no output.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/local.js';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_TEST, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

let matrix: FakeMatrix | undefined;
let ai: FakeOpenAIServer | undefined;
afterEach(async () => {
  await matrix?.close();
  await ai?.close();
});

describe('npm start with the Matrix variables', () => {
  it('starts the channel, says so in the start summary, and answers a message', async () => {
    matrix = await startFakeMatrix();
    ai = await startFakeOpenAI();
    ai.script([{ text: 'Hello from the started bot.' }]);
    const room = matrix.directRoom(MATRIX_ALICE);
    const prefix = testPrefix();
    const child = spawn(process.execPath, ['--import', 'tsx', 'app/cli.ts'], {
      env: {
        PATH: process.env.PATH ?? '',
        REDIS_URL: redisUrl(),
        STEERBOT_PREFIX: prefix,
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: ai.url,
        STEERBOT_MODEL: 'fake-model',
        STEERBOT_MODEL_CONTEXT_WINDOW: '128000',
        MATRIX_ACCESS_TOKEN: MATRIX_TEST.accessToken,
        MATRIX_HOMESERVER_URL: matrix.url,
        MATRIX_USER_ID: MATRIX_TEST.userId,
        MATRIX_AUTO_JOIN: MATRIX_ALICE,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exit = new Promise((resolve) => child.once('exit', resolve));
    try {
      const steps = await waitFor(
        () => {
          if (child.exitCode !== null) throw new Error(`steerbot exited ${child.exitCode}:\n${out}`);
          const line = out.split('\n').find((l) => l.includes('"next steps"'));
          return line && (JSON.parse(line) as { steps: string[] }).steps;
        },
        40_000,
        'the start summary',
      );
      expect(steps).toContain('  channels: matrix, web');

      const fake = matrix;
      await fake.waitUntil(() => fake.calls.some((c) => c.kind === 'sync' && c.query.since !== undefined), 20_000, 'an incremental /sync');
      fake.message(room, MATRIX_ALICE, 'hi');
      expect(await fake.waitUntil(() => fake.texts(room)[0], 20_000, 'the answer')).toBe('Hello from the started bot.');
    } finally {
      child.kill('SIGTERM');
      await exit;
      const { Redis } = await import('ioredis');
      const redis = new Redis(redisUrl());
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    }
    expect(out).not.toContain(MATRIX_TEST.accessToken);
  }, 90_000);
});
