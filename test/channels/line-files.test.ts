/**
 * Files out on LINE: the real plugin, started on a host HTTP server (which
 * serves the signed file URLs), delivering through a run's delivery with the
 * real `@line/bot-sdk` client against the fake LINE API. With `filesUrl`, an
 * image goes as an image message, a spoken reply as an audio message, other
 * files as a link; too large, or without `filesUrl`, one clear text message.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createLinePlugin, type LineConfigInput } from '../../plugins/line/channel.js';
import { fileMessages, LINE_IMAGE_MAX_BYTES, UNKNOWN_AUDIO_DURATION_MS } from '../../plugins/line/files.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { oggDurationMs } from '../../src/plugin/ogg.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeLine, LINE_ALICE, LINE_TEST, startFakeLine } from '../../testing/fakes/line-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

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

  it('sends a document as a text message with its name and signed link', async () => {
    await start({ filesUrl: FILES_URL });
    await delivery('run3').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' }, { key: 'k_3' });
    expect(line.sent).toHaveLength(1);
    const [caption, link] = line.sent[0]!.text.split('\n');
    expect(caption).toBe('Q3 report');
    expect(link).toMatch(new RegExp(`^report\\.pdf: ${FILES_URL}/line/files/line%3A${LINE_ALICE}/[0-9a-f]{32}\\?expires=\\d+&sig=[0-9a-f]{64}$`));
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
