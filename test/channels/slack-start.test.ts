/**
 * `npm start` with SLACK_BOT_TOKEN and SLACK_APP_TOKEN starts the Slack
 * channel in Socket Mode (against the fake Slack, via SLACK_API_URL), says
 * so in its start summary, answers a DM, and never prints the tokens.
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { eventCallback, type FakeSlack, SLACK_APP_TOKEN, SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, builtCli, packageBuilt } from '../helpers/built-package.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

let slack: FakeSlack;
let ai: FakeOpenAIServer;
// The CLI runs as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeEach(async () => {
  slack = await startFakeSlack();
  ai = await startFakeOpenAI();
});
afterEach(async () => {
  await slack.close();
  await ai.close();
});

describe('npm start with Slack tokens', () => {
  it('connects over Socket Mode, says so in the summary, answers a DM, and logs no token', async () => {
    const prefix = testPrefix();
    const port = await freePort();
    const child = spawn(process.execPath, [await builtCli()], {
      env: {
        PATH: process.env.PATH ?? '',
        REDIS_URL: redisUrl(),
        PORT: String(port),
        HOST: '127.0.0.1',
        STEERBOT_PREFIX: prefix,
        STEERBOT_QUEUE_NAME: `runs-${prefix}`,
        STEERBOT_WEB: 'false',
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: ai.url,
        SLACK_BOT_TOKEN,
        SLACK_APP_TOKEN,
        SLACK_API_URL: slack.apiUrl,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await waitFor(() => out.includes('"next steps"'), 60_000, `the start summary; output:\n${out}`);
      expect(out).toContain('  channels: slack');
      expect(slack.openSockets()).toBe(1);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

      ai.script([{ text: 'Hi from the started bot.' }]);
      const envelope = slack.deliver('events_api', eventCallback({ channel: 'D0000DM1', ts: '1700000001.000100', user: 'U0000ANN', text: 'hello' }));
      expect(await waitFor(() => slack.textsIn('D0000DM1')[0], 30_000, 'the reply')).toBe('Hi from the started bot.');
      expect(slack.acks).toContain(envelope);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exit).toBe(0);
    const redis = new Redis(redisUrl());
    await cleanupPrefix(redis, prefix);
    await redis.quit();
    for (const token of [SLACK_BOT_TOKEN, SLACK_APP_TOKEN]) expect(out).not.toContain(token);
  }, 90_000);
});
