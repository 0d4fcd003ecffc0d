/**
 * `npm start` with the WhatsApp variables: the real process starts the
 * channel, its start summary lists it, and a signed delivery from the fake
 * Cloud API is answered through the Graph API (model: the fake
 * OpenAI-compatible server). No secret reaches the output.
 */
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/redis/local.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WA_ALICE, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

let wa: FakeWhatsApp | undefined;
let ai: FakeOpenAIServer | undefined;
afterEach(async () => {
  await wa?.close();
  await ai?.close();
});

describe('npm start with the WhatsApp variables', () => {
  it('starts the channel, says so in the start summary, and answers a message', async () => {
    wa = await startFakeWhatsApp();
    ai = await startFakeOpenAI();
    ai.script([{ text: 'Hello from the started bot.' }]);
    const port = await freePort();
    const prefix = testPrefix();
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
        WHATSAPP_ACCESS_TOKEN: WHATSAPP_TEST.accessToken,
        WHATSAPP_PHONE_NUMBER_ID: WHATSAPP_TEST.phoneNumberId,
        WHATSAPP_APP_SECRET: WHATSAPP_TEST.appSecret,
        WHATSAPP_VERIFY_TOKEN: WHATSAPP_TEST.verifyToken,
        WHATSAPP_GRAPH_API_URL: wa.graphUrl,
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
      expect(steps).toContain('  channels: whatsapp, web');

      const res = await postDelivery(`http://127.0.0.1:${port}/whatsapp/webhook`, messageDelivery({ text: 'hi' }));
      expect(res.status).toBe(200);
      const reply = await wa.waitUntil(() => wa!.sent[0], 20_000, 'the reply');
      expect(reply).toMatchObject({ to: WA_ALICE.waId, text: 'Hello from the started bot.' });
    } finally {
      child.kill('SIGTERM');
      await exit;
      const { Redis } = await import('ioredis');
      const redis = new Redis(redisUrl());
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    }
    for (const secret of [WHATSAPP_TEST.accessToken, WHATSAPP_TEST.appSecret, WHATSAPP_TEST.verifyToken]) expect(out).not.toContain(secret);
  }, 90_000);
});
