/**
 * Files out on LINE: the real plugin, started on a host HTTP server (which
 * serves the signed file URLs), delivering through a run's delivery with the
 * real `@line/bot-sdk` client against the fake LINE API. With `filesUrl`, an
 * image goes as an image message, a spoken reply as an audio message (made as
 * AAC and put in an M4A container, which LINE plays, end to end through the
 * runner and the AI SDK's speech generation), other files as a link; too
 * large, or without `filesUrl`, one clear text message.
 */
import { Redis } from 'ioredis';
import { ALL_FORMATS, BufferSource, Input } from 'mediabunny';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createLinePlugin, type LineConfigInput } from '../../plugins/line/channel.js';
import { fileMessages, LINE_IMAGE_MAX_BYTES } from '../../plugins/line/files.js';
import { lineAudio } from '../../plugins/line/m4a.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { createSpeechModel } from '../../runner/model.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeLine, LINE_ALICE, LINE_TEST, lineDelivery, lineTextEvent, startFakeLine } from '../../testing/fakes/line-server.js';
import { FAKE_AAC_FRAME_MS, fakeSpeech, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { PDF, PNG } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { startLineSystem } from './line-harness.js';

const logger = createLogger({ level: 'silent' });
const CID = `line:${LINE_ALICE}`;
const FILES_URL = 'https://bot.example.test';

/** One Ogg page holding `packet`, with granule position `granule`. */
function oggPage(granule: number, packet: Buffer): Buffer {
  const header = Buffer.alloc(27);
  header.write('OggS', 0, 'latin1');
  header.writeBigUInt64LE(BigInt(granule), 6);
  header[26] = 1;
  return Buffer.concat([header, Buffer.from([packet.length]), packet]);
}
/** An Ogg Opus file of 2 s: pre-skip 312, last granule 2 × 48 000 + 312. */
const opusHead = Buffer.concat([Buffer.from('OpusHead', 'latin1'), Buffer.from([1, 1, 0x38, 0x01, 0x80, 0xbb, 0, 0, 0, 0, 0])]);
const OGG = Buffer.concat([oggPage(0, opusHead), oggPage(96_312, Buffer.from([1, 2, 3]))]);

/** What a file's bytes are as a container: its MIME type, its audio codec and length in ms (mediabunny reads them back). */
async function probe(bytes: Uint8Array): Promise<{ type: string; codec: string | null; ms: number }> {
  const input = new Input({ formats: ALL_FORMATS, source: new BufferSource(bytes) });
  const track = await input.getPrimaryAudioTrack();
  return { type: await input.getMimeType(), codec: (await track?.getCodecParameterString()) ?? null, ms: Math.round((await input.computeDuration()) * 1000) };
}

let line: FakeLine;
let h: { url: string; plugin: ChannelPlugin; prefix: string; redis: Redis; http: HttpServer };
/** Whether the test started the plugin (`h` is its). */
let started = false;

async function start(config: Partial<LineConfigInput>): Promise<void> {
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = createLinePlugin({ ...LINE_TEST, apiBaseURL: line.apiUrl, ...config }, { logger, redis, prefix });
  const { host } = ingestOnlyHost({ http, redis, prefix, logger, settings: () => ({}), outbound: () => plugin.outbound, access: () => ({ channels: {} }) });
  await plugin.start(host);
  h = { url: await listen(http, { host: '127.0.0.1', port: 0 }), plugin, prefix, redis, http };
  started = true;
}

beforeEach(async () => {
  line = await startFakeLine();
});
afterEach(async () => {
  if (started) {
    started = false;
    await h.plugin.stop();
    await h.http.close();
    await cleanupPrefix(h.redis, h.prefix);
    await h.redis.quit();
  }
  await line.close();
});

const delivery = (runId: string) =>
  new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId: CID, runId, resolve: () => h.plugin.outbound, logger, sleep: async () => undefined });
/** GETs a URL LINE was given from the local host (LINE reaches it at `filesUrl`). */
const download = async (url: string) => {
  const u = new URL(url);
  expect(u.origin).toBe(FILES_URL);
  const res = await fetch(`${h.url}${u.pathname}${u.search}`);
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
};

describe('line files out', () => {
  it('sends an image as an image message whose URLs serve the bytes, then its caption', async () => {
    await start({ filesUrl: FILES_URL });
    expect(await delivery('run1').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG, caption: 'Sales' }, { key: 'k_1' })).toEqual({
      outcome: 'sent',
    });
    expect(line.sent.map((m) => [m.type, m.text])).toEqual([
      ['image', ''],
      ['text', 'Sales'],
    ]);
    const image = line.sent[0]!;
    expect(image.previewUrl).toBe(image.url);
    const got = await download(image.url!);
    expect(got.status).toBe(200);
    expect(got.bytes.equals(PNG)).toBe(true);
  });

  it('sends AAC audio as an M4A audio message timed from its frames; M4A as it is; Ogg or MP3, which LINE does not promise to play, as a link', async () => {
    await start({ filesUrl: FILES_URL });
    const spoken = 'one AAC frame of the fake speech per character';
    const aac = fakeSpeech(spoken, 'aac');
    await delivery('run2').file({ name: 'reply.aac', mimeType: 'audio/aac', bytes: aac, voice: true }, { key: 'voice' });
    const ms = Math.round(spoken.length * FAKE_AAC_FRAME_MS);
    expect(line.sent[0]).toMatchObject({ type: 'audio', duration: ms });
    const m4a = (await download(line.sent[0]!.url!)).bytes;
    expect(await probe(m4a)).toEqual({ type: 'audio/mp4; codecs="mp4a.40.2"', codec: 'mp4a.40.2', ms });

    await delivery('run2').file({ name: 'again.m4a', mimeType: 'audio/mp4', bytes: m4a }, { key: 'm4a' });
    expect(line.sent[1]).toMatchObject({ type: 'audio', duration: ms });
    await delivery('run2').file({ name: 'reply.ogg', mimeType: 'audio/ogg', bytes: OGG, voice: true }, { key: 'ogg' });
    await delivery('run2').file({ name: 'song.mp3', mimeType: 'audio/mpeg', bytes: Buffer.from('ID3 an mp3') }, { key: 'mp3' });
    expect(line.sent.slice(2).map((m) => [m.type, m.text?.split(': ')[0]])).toEqual([
      ['text', 'reply.ogg'],
      ['text', 'song.mp3'],
    ]);
  });

  it('sends audio that says it is AAC or M4A but does not parse as such as a link, keeping its bytes', async () => {
    expect(await lineAudio({ name: 'x.aac', mimeType: 'audio/aac', bytes: Buffer.from('not adts at all') })).toBeUndefined();
    expect(await lineAudio({ name: 'x.m4a', mimeType: 'audio/mp4', bytes: OGG })).toBeUndefined();
    await start({ filesUrl: FILES_URL });
    await delivery('run7').file({ name: 'x.aac', mimeType: 'audio/aac', bytes: Buffer.from('not adts at all') }, { key: 'bad' });
    expect(line.sent[0]).toMatchObject({ type: 'text' });
    expect((await download(line.sent[0]!.text!.split(': ')[1]!)).bytes.toString()).toBe('not adts at all');
  });

  it('speaks a reply end to end as an M4A audio message: the speech asked as aac, put in an M4A container at the URL, its length from its frames', async () => {
    const ai = await startFakeOpenAI();
    const harness = await RunnerHarness.start();
    try {
      ai.script([{ text: 'The train leaves at nine.' }]);
      const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: ai.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
      const voice = { model: createSpeechModel(settings, 'gpt-4o-mini-tts', 'agents.local-agent.voice.model'), replies: 'always' as const };
      const agent = createLocalAgentPlugin({ model: fakeModel(ai.url), builtins: { currentTime: false }, voice });
      const system = await startLineSystem({ h: harness, line, agent, config: { filesUrl: FILES_URL } });
      try {
        await system.deliver(lineDelivery(lineTextEvent({ text: 'when does the train leave?', replyToken: line.issueReplyToken(LINE_ALICE) })));
        const sent = await line.waitUntil(() => line.sent.length >= 2 && line.sent, 15_000, 'the text and the audio');
        await harness.idle(15_000, CID);
        expect(line.sent.map((m) => m.type)).toEqual(['text', 'audio']);
        expect(sent[0]!.text).toBe('The train leaves at nine.');
        expect(ai.speeches).toEqual([expect.objectContaining({ input: 'The train leaves at nine.', response_format: 'aac' })]);
        const audio = sent[1]!;
        expect(audio.url).toMatch(new RegExp(`^${FILES_URL}/line/files/line%3A${LINE_ALICE}/[0-9a-f]{32}\\.m4a\\?expires=\\d+&sig=[0-9a-f]{64}$`));
        // One AAC frame (1024 samples at 24 kHz) per character of the answer (the fake's speech).
        expect(audio.duration).toBe(Math.round(25 * FAKE_AAC_FRAME_MS));
        const u = new URL(audio.url!);
        expect(u.origin).toBe(FILES_URL);
        const res = await fetch(`${new URL(system.url).origin}${u.pathname}${u.search}`);
        expect(res.headers.get('content-type')).toBe('audio/mp4');
        const m4a = new Uint8Array(await res.arrayBuffer());
        expect(await probe(m4a)).toEqual({ type: 'audio/mp4; codecs="mp4a.40.2"', codec: 'mp4a.40.2', ms: Math.round(25 * FAKE_AAC_FRAME_MS) });
        // The speech's AAC frames, kept as they are (no new encoding): each frame's body is in the container.
        expect(Buffer.from(m4a).includes(Buffer.alloc(32, 'T'.charCodeAt(0)))).toBe(true);
      } finally {
        await system.plugin.stop();
        await system.http.close();
      }
    } finally {
      await harness.close();
      await ai.close();
    }
  });

  it('sends a document as a text message with its name and signed link', async () => {
    await start({ filesUrl: FILES_URL });
    await delivery('run3').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' }, { key: 'k_3' });
    expect(line.sent).toHaveLength(1);
    const [caption, link] = line.sent[0]!.text.split('\n');
    expect(caption).toBe('Q3 report');
    expect(link).toMatch(new RegExp(`^report\\.pdf: ${FILES_URL}/line/files/line%3A${LINE_ALICE}/[0-9a-f]{32}\\.pdf\\?expires=\\d+&sig=[0-9a-f]{64}$`));
    expect((await download(link!.slice('report.pdf: '.length))).bytes.equals(PDF)).toBe(true);
  });

  it('sends one clear text message instead of a file over maxFileBytes', async () => {
    await start({ filesUrl: FILES_URL, maxFileBytes: 4096 });
    const result = await delivery('run4').file({ name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(5000) }, { key: 'k_4' });
    expect(result).toEqual({ outcome: 'too-large', maxBytes: 4096 });
    expect(line.sent.map((m) => [m.type, m.text])).toEqual([
      ['text', "[file huge.zip could not be sent here: it is larger than this channel's limit of 4 KB]"],
    ]);
    expect(await h.redis.keys(`${h.prefix}:{c:${CID}}:file*`)).toEqual([]);
  });

  it('without filesUrl takes no files: one clear text message', async () => {
    await start({});
    expect(h.plugin.outbound.sendFile).toBeUndefined();
    expect(await delivery('run5').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG }, { key: 'k_5' })).toEqual({ outcome: 'unsupported' });
    expect(line.sent.map((m) => [m.type, m.text])).toEqual([['text', '[file chart.png could not be sent here: this channel does not take files]']]);
  });

  it('retries a push refused with 429 and shows the image once', async () => {
    await start({ filesUrl: FILES_URL });
    line.failNext('push', { status: 429, retryAfterSeconds: 1 });
    expect(await delivery('run6').file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG }, { key: 'k_6' })).toEqual({ outcome: 'sent' });
    expect(line.calls.filter((c) => c.kind === 'push').map((c) => c.status)).toEqual([429, 200]);
    expect(line.sent.filter((m) => m.type === 'image')).toHaveLength(1);
  });

  it("sends an image over LINE's 10 MB image limit as a link, and audio without a length as a link", () => {
    const url = `${FILES_URL}/line/files/x/y`;
    const big = fileMessages({ name: 'big.png', mimeType: 'image/png', bytes: new Uint8Array(LINE_IMAGE_MAX_BYTES + 1) }, url);
    expect(big).toEqual([{ type: 'text', text: `big.png: ${url}` }]);
    const mp3 = fileMessages({ name: 'a.mp3', mimeType: 'audio/mpeg', bytes: Buffer.from('ID3 not ogg') }, url);
    expect(mp3).toEqual([{ type: 'text', text: `a.mp3: ${url}` }]);
    expect(fileMessages({ name: 'a.m4a', mimeType: 'audio/mp4', bytes: Buffer.from('m4a') }, url, 1500)).toEqual([
      { type: 'audio', originalContentUrl: url, duration: 1500 },
    ]);
  });
});
