/**
 * `npm start` with the Teams variables: the real process starts the
 * channel, its start summary lists it, and an activity POSTed to its
 * messaging endpoint with a Bot Service token signed by the fake's key (its
 * key set standing in for Bot Service's) is answered in
 * the conversation (model: the fake OpenAI-compatible server). The client
 * secret reaches no output.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeTeams, startFakeTeams, TEAMS_TEST } from '../../testing/fakes/teams-server.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { startSteerbot } from './started-steerbot.js';
import { postActivity, teamsTestConfig } from './teams-harness.js';

let teams: FakeTeams | undefined;
let ai: FakeOpenAIServer | undefined;
// The CLI runs as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

afterEach(async () => {
  await teams?.close();
  await ai?.close();
});

describe('npm start with the Teams variables', () => {
  it('starts the channel, says so in the start summary, and answers an activity', async () => {
    const fake = (teams = await startFakeTeams());
    ai = await startFakeOpenAI();
    ai.script([{ text: 'Hello from the started bot.' }]);
    const bot = await startSteerbot(ai.url, {
      TEAMS_APP_ID: TEAMS_TEST.appId,
      TEAMS_APP_PASSWORD: TEAMS_TEST.appPassword,
      TEAMS_TENANT_ID: TEAMS_TEST.tenantId,
      TEAMS_AUTHORITY_ENDPOINT: fake.url,
      TEAMS_BOT_FRAMEWORK_KEYS_URL: String(teamsTestConfig(fake).botFrameworkKeysUrl),
      TEAMS_SERVICE_URL: fake.serviceUrl(),
      TEAMS_SERVICE_URL_HOSTS: '127.0.0.1',
    });
    const { port, steps } = bot;
    try {
      expect(steps).toContain('  channels: teams, web');

      const res = await postActivity(fake, `http://127.0.0.1:${port}/api/messages`, fake.message({ conversationId: 'a:1started', text: 'hi' }));
      expect(res.status).toBe(200);
      expect(await fake.waitUntil(() => fake.texts('a:1started')[0], 20_000, 'the answer')).toBe('Hello from the started bot.');
    } finally {
      await bot.stop();
    }
    expect(bot.output()).not.toContain(TEAMS_TEST.appPassword);
  }, 90_000);
});
