/**
 * `npm start` with the WhatsApp variables: the real process starts the
 * channel, its start summary lists it, and a signed delivery from the fake
 * Cloud API is answered through the Graph API (model: the fake
 * OpenAI-compatible server). No secret reaches the output.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WA_ALICE, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { startSteerbot } from './started-steerbot.js';

let wa: FakeWhatsApp | undefined;
let ai: FakeOpenAIServer | undefined;
// The CLI runs as the package installs it (dist/app/cli.js, built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

afterEach(async () => {
  await wa?.close();
  await ai?.close();
});

describe('npm start with the WhatsApp variables', () => {
  it('starts the channel, says so in the start summary, and answers a message', async () => {
    wa = await startFakeWhatsApp();
    ai = await startFakeOpenAI();
    ai.script([{ text: 'Hello from the started bot.' }]);
    const _port = await freePort();
    const bot = await startSteerbot(ai.url, {
      WHATSAPP_ACCESS_TOKEN: WHATSAPP_TEST.accessToken,
      WHATSAPP_PHONE_NUMBER_ID: WHATSAPP_TEST.phoneNumberId,
      WHATSAPP_APP_SECRET: WHATSAPP_TEST.appSecret,
      WHATSAPP_VERIFY_TOKEN: WHATSAPP_TEST.verifyToken,
      WHATSAPP_GRAPH_API_URL: wa.graphUrl,
    });
    const { port, steps } = bot;
    try {
      expect(steps).toContain('  channels: whatsapp, web');

      const res = await postDelivery(`http://127.0.0.1:${port}/whatsapp/webhook`, messageDelivery({ text: 'hi' }));
      expect(res.status).toBe(200);
      const reply = await wa.waitUntil(() => wa!.sent[0], 20_000, 'the reply');
      expect(reply).toMatchObject({ to: WA_ALICE.waId, text: 'Hello from the started bot.' });
    } finally {
      await bot.stop();
    }
    for (const secret of [WHATSAPP_TEST.accessToken, WHATSAPP_TEST.appSecret, WHATSAPP_TEST.verifyToken]) expect(bot.output()).not.toContain(secret);
  }, 90_000);
});
