/**
 * `npm start` with the Matrix variables: the real process starts the
 * channel, its start summary lists it, and a message in a room of the fake
 * homeserver is answered there (model: the fake OpenAI-compatible server).
 * The access token reaches no output.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FakeMatrix, MATRIX_ALICE, MATRIX_TEST, startFakeMatrix } from '../../testing/fakes/matrix-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { startSteerbot } from './started-steerbot.js';

let matrix: FakeMatrix | undefined;
let ai: FakeOpenAIServer | undefined;
// The CLI runs as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

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
    const bot = await startSteerbot(ai.url, {
      MATRIX_ACCESS_TOKEN: MATRIX_TEST.accessToken,
      MATRIX_HOMESERVER_URL: matrix.url,
      MATRIX_USER_ID: MATRIX_TEST.userId,
      MATRIX_AUTO_JOIN: MATRIX_ALICE,
    });
    const { steps } = bot;
    try {
      expect(steps).toContain('  channels: matrix, web');

      const fake = matrix;
      await fake.waitUntil(() => fake.calls.some((c) => c.kind === 'sync' && c.query.since !== undefined), 20_000, 'an incremental /sync');
      fake.message(room, MATRIX_ALICE, 'hi');
      expect(await fake.waitUntil(() => fake.texts(room)[0], 20_000, 'the answer')).toBe('Hello from the started bot.');
    } finally {
      await bot.stop();
    }
    expect(bot.output()).not.toContain(MATRIX_TEST.accessToken);
  }, 90_000);
});
