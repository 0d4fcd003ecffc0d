/**
 * Files out on LINE: the real plugin, started on a host HTTP server (which
 * serves the signed file URLs), delivering through a run's delivery with the
 * real `@line/bot-sdk` client against the fake LINE API. With `filesUrl`, an
 * image goes as an image message, a spoken reply as an audio message (made as
 * MP3, which LINE plays, end to end through the runner and the AI SDK's
 * speech generation), other files as a link; too large, or without
 * `filesUrl`, one clear text message.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createLinePlugin, type LineConfigInput } from '../../plugins/line/channel.js';
import { fileMessages, LINE_IMAGE_MAX_BYTES, mp3DurationMs, UNKNOWN_AUDIO_DURATION_MS } from '../../plugins/line/files.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { createSpeechModel } from '../../runner/model.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { oggDurationMs } from '../../src/plugin/ogg.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeLine, LINE_ALICE, LINE_TEST, lineDelivery, lineTextEvent, startFakeLine } from '../../testing/fakes/line-server.js';
import { fakeSpeech, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { fakeModel, RunnerHarness } from '../runner/harness.js';
import { startLineSystem } from './line-harness.js';

const logger = createLogger({ level: 'silent' });
const CID = `line:${LINE_ALICE}`;
const FILES_URL = 'https://bot.example.test';
const PDF = Buffer.from('%PDF-1.7\n%%EOF\n');
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(32, 2)]);

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

/**
 * MPEG Layer III frames by bitrate (kbit/s), each with its header (mono, no
 * CRC) and its length in bytes as the standard sets it (144 × bitrate ÷ rate,
 * plus the padding byte; 72 × for MPEG-2).
 */
const MP3_FRAMES = {
  'mpeg1-32k-44.1k': { header: [0xff, 0xfb, 0x10, 0xc4], bytes: 104, ms: 1152 / 44.1 },
  'mpeg1-128k-44.1k': { header: [0xff, 0xfb, 0x90, 0xc4], bytes: 417, ms: 1152 / 44.1 },
  'mpeg1-128k-44.1k-padded': { header: [0xff, 0xfb, 0x92, 0xc4], bytes: 418, ms: 1152 / 44.1 },
  'mpeg1-320k-44.1k': { header: [0xff, 0xfb, 0xe0, 0xc4], bytes: 1044, ms: 1152 / 44.1 },
  'mpeg2-64k-22.05k': { header: [0xff, 0xf3, 0x80, 0xc4], bytes: 208, ms: 576 / 22.05 },
} as const;
/** `n` frames of one kind, their bodies filled with `fill` (no byte of it a frame sync). */
const mp3Frames = (kind: keyof typeof MP3_FRAMES, n: number, fill = 0x55): Buffer[] => {
  const f = MP3_FRAMES[kind];
  return Array.from({ length: n }, () => Buffer.concat([Buffer.from(f.header), Buffer.alloc(f.bytes - 4, fill)]));
};
/** An ID3v2.4 tag holding `body` (its size syncsafe: 7 bits a byte). */
const id3v2 = (body: Buffer) =>
  Buffer.concat([
    Buffer.from('ID3', 'latin1'),
    Buffer.from([4, 0, 0, (body.length >> 21) & 0x7f, (body.length >> 14) & 0x7f, (body.length >> 7) & 0x7f, body.length & 0x7f]),
    body,
  ]);

let line: FakeLine;
let h: { url: string; plugin: ChannelPlugin; prefix: string; redis: Redis; http: HttpServer };
/** Whether the test started the plugin (`h` is its). */
let started = false;

async function start(config: Partial<LineConfigInput>): Promise<void> {
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576 } }, redis, logger });
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

  it('sends a spoken reply as an audio message with its length read from the Ogg file', async () => {
    await start({ filesUrl: FILES_URL });
    expect(oggDurationMs(OGG)).toBe(2000);
    await delivery('run2').file({ name: 'reply.ogg', mimeType: 'audio/ogg', bytes: OGG, voice: true }, { key: 'voice' });
    expect(line.sent).toHaveLength(1);
    expect(line.sent[0]).toMatchObject({ type: 'audio', duration: 2000 });
    expect((await download(line.sent[0]!.url!)).bytes.equals(OGG)).toBe(true);
  });

  it('reads the length of a constant-bitrate MP3 from its frames, past an ID3v2 tag and an ID3v1 tag', () => {
    // A tag body holding what looks like a frame header: it is skipped by its size, not scanned.
    const tag = id3v2(Buffer.concat([Buffer.from([0xff, 0xfb, 0x90, 0xc4]), Buffer.alloc(300, 0x20)]));
    const id3v1 = Buffer.concat([Buffer.from('TAG', 'latin1'), Buffer.alloc(125, 0x20)]);
    const cbr = Buffer.concat([tag, ...mp3Frames('mpeg1-128k-44.1k', 100), id3v1]);
    expect(mp3DurationMs(cbr)).toBe(Math.round(100 * MP3_FRAMES['mpeg1-128k-44.1k'].ms)); // 2612
    expect(mp3DurationMs(Buffer.concat(mp3Frames('mpeg2-64k-22.05k', 40)))).toBe(Math.round(40 * MP3_FRAMES['mpeg2-64k-22.05k'].ms)); // 1045
    expect(mp3DurationMs(OGG)).toBeUndefined();
    expect(mp3DurationMs(Buffer.from('ID3 not an mp3'))).toBeUndefined();
  });

  it('reads the length of a variable-bitrate MP3 frame by frame, after bytes that start no frame, leaving out a cut-off last frame', () => {
    const junk = Buffer.from([0x00, 0xff, 0xfb, 0x00, 0x12]);
    const frames = [
      ...mp3Frames('mpeg1-32k-44.1k', 7),
      ...mp3Frames('mpeg1-320k-44.1k', 3),
      ...mp3Frames('mpeg1-128k-44.1k-padded', 5),
      ...mp3Frames('mpeg1-128k-44.1k', 4),
      ...mp3Frames('mpeg1-32k-44.1k', 1),
    ];
    const cut = mp3Frames('mpeg1-320k-44.1k', 1)[0]!.subarray(0, 500);
    expect(mp3DurationMs(Buffer.concat([junk, ...frames, cut]))).toBe(Math.round(20 * (1152 / 44.1))); // 523
    // A constant-bitrate reading (the first frame's bitrate over the file's size) would say far more.
    expect(Math.round(((Buffer.concat(frames).length * 8) / 32_000) * 1000)).toBeGreaterThan(1500);
  });

  it('speaks a reply end to end as an MP3 audio message: the speech asked as mp3, its bytes at the URL, its length read from the frames', async () => {
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
        expect(ai.speeches).toEqual([expect.objectContaining({ input: 'The train leaves at nine.', response_format: 'mp3' })]);
        const audio = sent[1]!;
        expect(audio.url).toMatch(new RegExp(`^${FILES_URL}/line/files/line%3A${LINE_ALICE}/[0-9a-f]{32}\\.mp3\\?expires=\\d+&sig=[0-9a-f]{64}$`));
        // One 26.12 ms frame per character of the answer (the fake's speech).
        expect(audio.duration).toBe(Math.round(25 * (1152 / 44.1)));
        const u = new URL(audio.url!);
        expect(u.origin).toBe(FILES_URL);
        const res = await fetch(`${new URL(system.url).origin}${u.pathname}${u.search}`);
        expect(res.headers.get('content-type')).toBe('audio/mpeg');
        expect(Buffer.from(await res.arrayBuffer()).equals(fakeSpeech('The train leaves at nine.', 'mp3'))).toBe(true);
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

  it("sends an image over LINE's 10 MB image limit as a link, and audio it cannot time with the documented length", () => {
    const url = `${FILES_URL}/line/files/x/y`;
    const big = fileMessages({ name: 'big.png', mimeType: 'image/png', bytes: new Uint8Array(LINE_IMAGE_MAX_BYTES + 1) }, url);
    expect(big).toEqual([{ type: 'text', text: `big.png: ${url}` }]);
    const mp3 = fileMessages({ name: 'a.mp3', mimeType: 'audio/mpeg', bytes: Buffer.from('ID3 not ogg') }, url);
    expect(mp3).toEqual([{ type: 'audio', originalContentUrl: url, duration: UNKNOWN_AUDIO_DURATION_MS }]);
  });
});
