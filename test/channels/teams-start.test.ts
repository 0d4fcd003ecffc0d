/**
 * `npm start` with the Teams variables: the real process starts the
 * channel, its start summary lists it, and an activity POSTed to its
 * messaging endpoint with a token signed by the fake's key is answered in
 * the conversation (model: the fake OpenAI-compatible server). The client
 * secret reaches no output.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTeams, startFakeTeams, TEAMS_TEST } from '../../testing/fakes/teams-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

let teams: FakeTeams | undefined;
let ai: FakeOpenAIServer | undefined;
afterEach(async () => {
  await teams?.close();
  await ai?.close();
});

describe('npm start with the Teams variables', () => {
  it('starts the channel, says so in the start summary, and answers an activity', async () => {
    const fake = (teams = await startFakeTeams());
    ai = await startFakeOpenAI();
    ai.script([{ text: 'Hello from the started bot.' }]);
    const prefix = testPrefix();
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'app/cli.ts'], {
      env: {
        PATH: process.env.PATH ?? '',
        REDIS_URL: redisUrl(),
        STEERBOT_PREFIX: prefix,
        HOST: '127.0.0.1',
        PORT: String(port),
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: ai.url,
        STEERBOT_MODEL: 'fake-model',
        STEERBOT_MODEL_CONTEXT_WINDOW: '128000',
        TEAMS_APP_ID: TEAMS_TEST.appId,
        TEAMS_APP_PASSWORD: TEAMS_TEST.appPassword,
        TEAMS_TENANT_ID: TEAMS_TEST.tenantId,
        TEAMS_AUTHORITY_ENDPOINT: fake.url,
        TEAMS_SERVICE_URL: fake.serviceUrl(),
        TEAMS_SERVICE_URL_HOSTS: '127.0.0.1',
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
      expect(steps).toContain('  channels: teams, web');

      const res = await fake.postActivity(`http://127.0.0.1:${port}/api/messages`, fake.message({ conversationId: 'a:1started', text: 'hi' }));
      expect(res.status).toBe(200);
      expect(await fake.waitUntil(() => fake.texts('a:1started')[0], 20_000, 'the answer')).toBe('Hello from the started bot.');
    } finally {
      child.kill('SIGTERM');
      await exit;
      const { Redis } = await import('ioredis');
      const redis = new Redis(redisUrl());
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    }
    expect(out).not.toContain(TEAMS_TEST.appPassword);
  }, 90_000);
});
