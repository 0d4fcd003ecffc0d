/**
 * Pictures and speech cost money: on a channel that takes no files (the
 * harness's recording outbound has no `sendFile`), `generate_image` refuses
 * before asking the image API, and a spoken reply is not generated at all —
 * the answer goes out as text alone, with no "could not be sent" notice.
 */
import { describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createImageModel, createSpeechModel } from '../../runner/model.js';
import { fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();
const settings = (baseURL: string) => ({
  provider: 'openai-compatible' as const,
  name: 'm',
  baseURL,
  apiKey: 'k',
  contextWindow: 128_000,
  outputReserve: 4000,
});

describe('paid media on a channel without files', () => {
  it('speaks nothing and sends no notice: the answer is text alone', async () => {
    t.fake.script([{ text: 'Plain answer.' }]);
    const voice = { model: createSpeechModel(settings(t.fake.url), 'tts', 'agents.local-agent.voice.model'), replies: 'always' as const };
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false }, voice }) });
    const r = (await t.h.ingest('hello')) as { runId: string };
    await t.h.runEnded(r.runId);
    expect(t.h.outbound.texts).toEqual(['Plain answer.']);
    expect(t.fake.speeches).toEqual([]);
  });

  it('generate_image refuses before paying for a picture', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_img', name: 'generate_image', args: { prompt: 'a fox' } }] }, { text: 'I cannot show pictures here.' }]);
    const images = { model: createImageModel(settings(t.fake.url), 'img', 'agents.local-agent.images.model') };
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), builtins: { currentTime: false, images } }) });
    const r = (await t.h.ingest('draw a fox')) as { runId: string };
    await t.h.runEnded(r.runId);
    expect(t.fake.images).toEqual([]);
    const result = JSON.parse(t.fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);
    expect(result).toMatchObject({ error: { tool: 'generate_image', category: 'unavailable' } });
    expect(t.h.outbound.texts).toEqual(['I cannot show pictures here.']);
  });
});
