/**
 * Spoken replies end to end: the Telegram webhook (real grammY plugin) → the
 * channel host → Redis → BullMQ → the runner with the local agent → the
 * answer as text, then read aloud by the AI SDK's speech generation against
 * the fake OpenAI speech API and sent with `sendVoice` on the fake Bot API,
 * once. `when-spoken-to` speaks only to a voice note; a profile's `voice`
 * wins over the agent's default; the text stays the recorded answer.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { HttpServer } from '../../host/http.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { speaks, type VoiceReplies, type VoiceReplyOptions } from '../../plugins/local-agent/voice-replies.js';
import { createSpeechModel } from '../../runner/model.js';
import type { RunContext } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { postUpdate, startTelegramSystem } from './telegram-harness.js';

const SECRET = 'e2e_voice_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;

let ai: FakeOpenAIServer | undefined;
let tg: FakeTelegram | undefined;
let h: RunnerHarness | undefined;
let http: HttpServer | undefined;
let plugin: ChannelPlugin | undefined;

async function start(replies: VoiceReplies): Promise<{ ai: FakeOpenAIServer; tg: FakeTelegram; http: HttpServer; h: RunnerHarness }> {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
  h = await RunnerHarness.start();
  const model = createSpeechModel(
    { provider: 'openai-compatible', name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 },
    'gpt-4o-mini-tts',
    'agents.local-agent.voice.model',
  );
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, voice: { model, voice: 'alloy', replies } }),
  }));
  return { ai, tg, http, h };
}

afterEach(async () => {
  await plugin?.stop();
  await http?.close();
  await h?.close();
  await tg?.close();
  await ai?.close();
  [plugin, http, h, tg, ai] = [undefined, undefined, undefined, undefined, undefined];
});

describe('spoken replies over Telegram', () => {
  it('always: the answer goes out as text, then once as a voice message reading it', async () => {
    const s = await start('always');
    s.ai.script([{ text: 'The meeting is at ten.' }]);
    expect(await postUpdate(s.http, SECRET, messageUpdate({ text: 'when is the meeting?' }))).toBe(200);
    await s.h.idle(15_000, CONVERSATION);

    expect(s.tg.sent.map((m) => m.text)).toEqual(['The meeting is at ten.']);
    expect(s.ai.speeches).toEqual([
      expect.objectContaining({ model: 'gpt-4o-mini-tts', input: 'The meeting is at ten.', voice: 'alloy', response_format: 'opus' }),
    ]);
    expect(s.tg.sentFiles).toHaveLength(1);
    expect(s.tg.sentFiles[0]).toMatchObject({ method: 'sendVoice', chatId: ALICE.id, name: 'reply.ogg' });
    expect(s.tg.sentFiles[0]!.bytes.toString()).toBe('OggSThe meeting is at ten.');
    // The text is the recorded answer.
    expect(JSON.stringify(await s.h.entries('model.step', CONVERSATION))).toContain('The meeting is at ten.');
  });

  it('always: a run that answers twice (a message steered in during its last step) speaks each answer once', async () => {
    const s = await start('always');
    s.ai.script([{ text: 'First answer.', delayMs: 1000 }, { text: 'Second answer.' }]);
    expect(await postUpdate(s.http, SECRET, messageUpdate({ text: 'first question' }))).toBe(200);
    await s.ai.waitForRequests(1, 10_000);
    expect(await postUpdate(s.http, SECRET, messageUpdate({ text: 'and another thing' }))).toBe(200);
    await s.h.idle(15_000, CONVERSATION);

    expect(s.tg.sent.map((m) => m.text)).toEqual(['First answer.', 'Second answer.']);
    expect(s.tg.sentFiles.map((f) => [f.method, f.bytes.toString()])).toEqual([
      ['sendVoice', 'OggSFirst answer.'],
      ['sendVoice', 'OggSSecond answer.'],
    ]);
    // One run answered both (the steered message was handed back to it): the voice keys must not collide.
    expect(new Set((await s.h.entries('run.started', CONVERSATION)).map((e) => e.run)).size).toBe(1);
  });

  it('when-spoken-to: a typed message gets text only, a voice note gets the voice reply too', async () => {
    const s = await start('when-spoken-to');
    s.ai.script([{ text: 'Typed answer.' }, { text: 'Spoken answer.' }]);
    expect(await postUpdate(s.http, SECRET, messageUpdate({ text: 'typed question' }))).toBe(200);
    await s.h.idle(15_000, CONVERSATION);
    expect(s.tg.sentFiles).toEqual([]);
    expect(s.ai.speeches).toEqual([]);

    const voice = messageUpdate({ extra: { voice: { file_id: 'voice-1', file_unique_id: 'v1', duration: 2, mime_type: 'audio/ogg' } } });
    expect(await postUpdate(s.http, SECRET, voice)).toBe(200);
    await s.h.idle(15_000, CONVERSATION);
    expect(s.tg.sent.map((m) => m.text)).toEqual(['Typed answer.', 'Spoken answer.']);
    expect(s.tg.sentFiles.map((f) => [f.method, f.bytes.toString()])).toEqual([['sendVoice', 'OggSSpoken answer.']]);
  });
});

describe('when a reply is spoken', () => {
  const o = { replies: 'off' } as VoiceReplyOptions;
  const ctx = (voice?: VoiceReplies) => ({ agent: { profile: voice && { voice } } }) as unknown as RunContext;
  const typed = [{}];
  const spoken = [{ attachments: [{ kind: 'audio' as const, ref: 'v' }] }];
  it("follows the run's profile over the agent's default", () => {
    expect(speaks(ctx(), o, spoken)).toBe(false);
    expect(speaks(ctx('always'), o, typed)).toBe(true);
    expect(speaks(ctx('off'), { ...o, replies: 'always' }, spoken)).toBe(false);
    expect(speaks(ctx('when-spoken-to'), o, typed)).toBe(false);
    expect(speaks(ctx('when-spoken-to'), o, spoken)).toBe(true);
  });
});
