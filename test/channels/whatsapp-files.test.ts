/**
 * Files out on WhatsApp: the real plugin's outbound side (unstarted, as a
 * runner uses it) against the fake Cloud API: the media upload to
 * `/<phone-id>/media`, then an image or document message naming the media
 * id, directly and through a run's delivery.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import { WHATSAPP_MAX_FILE_BYTES } from '../../plugins/whatsapp/outbound.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { type FakeWhatsApp, startFakeWhatsApp, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { PDF, PNG } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const CID = 'whatsapp:15551234567';

let wa: FakeWhatsApp;
let redis: Redis;
let prefix: string;
let outbound: ChannelOutbound;

beforeEach(async () => {
  wa = await startFakeWhatsApp();
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  outbound = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl }, { logger, redis, prefix }).outbound;
});
afterEach(async () => {
  await wa.close();
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

const delivery = (runId: string) =>
  new RunDelivery({ client: redis, prefix, conversationId: CID, runId, resolve: () => outbound, logger, sleep: async () => undefined });

describe('whatsapp files out', () => {
  it('uploads a document and sends a document message with its file name and caption', async () => {
    const { messageId } = await outbound.sendFile!(CID, { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' });

    expect(wa.uploads).toHaveLength(1);
    expect(wa.uploads[0]).toMatchObject({ mimeType: 'application/pdf', filename: 'report.pdf' });
    expect(wa.uploads[0]!.data.equals(PDF)).toBe(true);
    expect(wa.sent).toHaveLength(1);
    expect(wa.sent[0]).toMatchObject({ id: messageId, to: '15551234567', type: 'document', text: 'Q3 report' });
    expect(wa.sent[0]!.media).toMatchObject({ id: wa.uploads[0]!.id, filename: 'report.pdf' });
    expect(outbound.maxFileBytes).toBe(WHATSAPP_MAX_FILE_BYTES);
  });

  it('sends an image as an image message', async () => {
    await outbound.sendFile!(CID, { name: 'chart.png', mimeType: 'image/png', bytes: PNG });
    expect(wa.sent.map((m) => m.type)).toEqual(['image']);
    expect(wa.sent[0]!.media!.data.equals(PNG)).toBe(true);
  });

  it('sends a spoken reply as an audio message (OGG/Opus plays as a voice message)', async () => {
    const OGG = Buffer.from('OggS spoken reply');
    await outbound.sendFile!(CID, { name: 'reply.ogg', mimeType: 'audio/ogg', bytes: OGG, voice: true });
    expect(wa.uploads[0]).toMatchObject({ mimeType: 'audio/ogg', filename: 'reply.ogg' });
    expect(wa.sent.map((m) => m.type)).toEqual(['audio']);
    expect(wa.sent[0]!.media!.data.equals(OGG)).toBe(true);
  });

  it('retries an upload refused with 429 through delivery and sends exactly one file message', async () => {
    wa.failNext('upload', { status: 429, code: 130429, retryAfterSeconds: 1 });

    expect(await delivery('run1').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_1' })).toEqual({ outcome: 'sent' });
    expect(wa.calls.filter((c) => c.kind === 'upload').map((c) => c.status)).toEqual([429, 200]);
    expect(wa.sent.filter((m) => m.type === 'document')).toHaveLength(1);
  });

  it('sends one clear message instead of a file over 100 MB', async () => {
    const result = await delivery('run2').file(
      { name: 'huge.zip', mimeType: 'application/zip', bytes: new Uint8Array(WHATSAPP_MAX_FILE_BYTES + 1) },
      { key: 'k_2' },
    );
    expect(result).toEqual({ outcome: 'too-large', maxBytes: WHATSAPP_MAX_FILE_BYTES });
    expect(wa.uploads).toHaveLength(0);
    expect(wa.sent.map((m) => m.text)).toEqual(["[file huge.zip could not be sent here: it is larger than this channel's limit of 100 MB]"]);
  });
});
