/**
 * `generate_image` end to end: the Telegram webhook (real grammY plugin) →
 * the channel host → Redis → BullMQ → the runner with the local agent, whose
 * scripted model calls `generate_image` → the AI SDK's image generation
 * against the fake OpenAI images API → delivery → `sendPhoto` on the fake Bot
 * API, once. A provider without an images API is refused at start, naming the setting.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createImageModel } from '../../runner/model.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { ConfigError } from '../../src/errors.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from './telegram-harness.js';

const SECRET = 'e2e_image_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;
const FOX = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('a red fox')]);
const settings = (baseURL: string) => ({
  provider: 'openai-compatible' as const,
  name: 'm',
  baseURL,
  apiKey: 'k',
  contextWindow: 128_000,
  outputReserve: 4000,
});

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;

beforeEach(async () => {
  ai = await startFakeOpenAI({ image: (prompt) => (prompt.includes('fox') ? FOX : Buffer.from('not an image')) });
  tg = await startFakeTelegram();
  h = await RunnerHarness.start();
  const images = { model: createImageModel(settings(ai.url), 'gpt-image-1', 'agents.local-agent.images.model'), size: '512x512' as const };
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false, images } }),
  }));
});

afterEach(() => stopTelegramSystem({ plugin, http }, h, tg, ai));

const toolResults = (i: number): any[] =>
  ai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => JSON.parse(m.content));

describe('generate_image over Telegram', () => {
  it('draws the picture the model asks for and sends it as one photo with its caption', async () => {
    ai.script([
      { toolCalls: [{ id: 'call_img', name: 'generate_image', args: { prompt: 'a red fox in the snow', caption: 'Your fox' } }] },
      { text: 'Here is your fox.' },
    ]);
    expect(await postUpdate(http, SECRET, messageUpdate({ text: 'draw me a fox' }))).toBe(200);
    await h.idle(15_000, CONVERSATION);

    expect(ai.images).toEqual([expect.objectContaining({ model: 'gpt-image-1', prompt: 'a red fox in the snow', n: 1, size: '512x512' })]);
    expect(tg.sentFiles).toHaveLength(1);
    expect(tg.sentFiles[0]).toMatchObject({ method: 'sendPhoto', chatId: ALICE.id, caption: 'Your fox' });
    expect(tg.sentFiles[0]!.bytes.equals(FOX)).toBe(true);
    expect(toolResults(1)).toEqual([{ sent: { name: 'image.png', type: 'image/png', bytes: FOX.byteLength } }]);
    expect(tg.sent.map((m) => m.text)).toEqual(['Here is your fox.']);
  });

  it('refuses an image provider without an images API at start, naming the setting', () => {
    expect(() => createImageModel({ ...settings(ai.url), provider: 'anthropic' }, 'x', 'agents.local-agent.images.model')).toThrow(ConfigError);
    try {
      createImageModel({ ...settings(ai.url), provider: 'anthropic' }, 'x', 'agents.local-agent.images.model');
    } catch (err) {
      expect((err as ConfigError).issues).toEqual([
        { path: 'agents.local-agent.images.model', message: 'image generation needs model.provider openai or openai-compatible (it is anthropic)' },
      ]);
    }
  });
});
