/**
 * Files through a run's delivery (runner/delivery/files.ts), with the real
 * Telegram plugin (grammY) against the fake Bot API: one outbox record per
 * file, 429 retried on the backoff path, a takeover after a recorded send
 * sends nothing, and a file the channel cannot take becomes one clear text
 * message, never a silent drop.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TELEGRAM_MAX_FILE_BYTES, TELEGRAM_MAX_PHOTO_BYTES } from '../../plugins/telegram/outbound.js';
import { type OutboxRecord, RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound, OutboundFile } from '../../src/channel.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { startTelegramHarness, type TelegramHarness } from '../channels/telegram-harness.js';

const CID = 'telegram:1001';
const PDF = Buffer.from('%PDF-1.7\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n');
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);

let h: TelegramHarness;
beforeEach(async () => {
  h = await startTelegramHarness();
});
afterEach(async () => {
  await h.close();
});

function delivery(out: ChannelOutbound | undefined, runId = 'run1'): RunDelivery {
  return new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId: CID, runId, resolve: () => out, logger: h.logger, sleep: async () => undefined });
}

async function outbox(): Promise<Record<string, OutboxRecord>> {
  const raw = await h.redis.hgetall(conversationKeys(h.prefix, CID).outbox);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, JSON.parse(v) as OutboxRecord]));
}

const report = (bytes: Uint8Array = PDF): OutboundFile => ({ name: 'report.pdf', mimeType: 'application/pdf', bytes, caption: 'Q3 report' });

describe('RunDelivery.file', () => {
  it('sends a document once and records it in the outbox under the call key', async () => {
    const result = await delivery(h.plugin.outbound).file(report(), { key: 'k_1' });

    expect(result).toEqual({ outcome: 'sent' });
    expect(h.fake.sentFiles).toHaveLength(1);
    expect(h.fake.sentFiles[0]).toMatchObject({ method: 'sendDocument', chatId: 1001, name: 'report.pdf', caption: 'Q3 report' });
    expect(h.fake.sentFiles[0]!.bytes.equals(PDF)).toBe(true);
    expect(await outbox()).toEqual({ 'run1:k_1:0': { status: 'acknowledged', messageId: String(h.fake.sentFiles[0]!.messageId) } });
  });

  it('sends an image as a photo', async () => {
    await delivery(h.plugin.outbound).file({ name: 'chart.png', mimeType: 'image/png', bytes: PNG }, { key: 'k_2' });
    expect(h.fake.sentFiles.map((f) => [f.method, f.name])).toEqual([['sendPhoto', 'chart.png']]);
    expect(h.fake.sentFiles[0]!.bytes.equals(PNG)).toBe(true);
  });

  it('sends an image over the 10 MB photo limit as a document', async () => {
    const big = Buffer.concat([PNG, Buffer.alloc(TELEGRAM_MAX_PHOTO_BYTES)]);
    expect(await delivery(h.plugin.outbound).file({ name: 'poster.png', mimeType: 'image/png', bytes: big }, { key: 'k_8' })).toEqual({ outcome: 'sent' });
    expect(h.fake.sentFiles.map((f) => [f.method, f.name, f.bytes.byteLength])).toEqual([['sendDocument', 'poster.png', big.byteLength]]);
  });

  it('retries an upload refused with 429 and sends exactly one file', async () => {
    h.fake.failNext('sendDocument', { error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } });

    expect(await delivery(h.plugin.outbound).file(report(), { key: 'k_3' })).toEqual({ outcome: 'sent' });
    expect(h.fake.callsOf('sendDocument').map((c) => c.outcome)).toEqual([429, 'ok']);
    expect(h.fake.sentFiles).toHaveLength(1);
  });

  it('does not send again for a takeover after the send was recorded', async () => {
    await delivery(h.plugin.outbound).file(report(), { key: 'k_4' });
    const again = await delivery(h.plugin.outbound).file(report(), { key: 'k_4' });

    expect(again).toEqual({ outcome: 'sent' });
    expect(h.fake.callsOf('sendDocument')).toHaveLength(1);
  });

  it("sends one clear message instead of a file over the channel's limit", async () => {
    const big = new Uint8Array(TELEGRAM_MAX_FILE_BYTES + 1);
    const d = delivery(h.plugin.outbound);
    expect(await d.file(report(big), { key: 'k_5' })).toEqual({ outcome: 'too-large', maxBytes: TELEGRAM_MAX_FILE_BYTES });
    // A takeover repeating the call finds the notice sent.
    await delivery(h.plugin.outbound).file(report(big), { key: 'k_5' });

    expect(h.fake.callsOf('sendDocument')).toHaveLength(0);
    expect(h.fake.sent.map((m) => m.text)).toEqual(["[file report.pdf could not be sent here: it is larger than this channel's limit of 50 MB]\nQ3 report"]);
  });

  it('sends one clear message on a channel that takes no files', async () => {
    const { sendFile: _, maxFileBytes: __, ...textOnly } = h.plugin.outbound;
    expect(await delivery(textOnly).file(report(), { key: 'k_6' })).toEqual({ outcome: 'unsupported' });
    expect(h.fake.sent.map((m) => m.text)).toEqual(['[file report.pdf could not be sent here: this channel does not take files]\nQ3 report']);
  });

  it('reports a file the platform refuses as failed and records it not sent', async () => {
    h.fake.failNext('sendDocument', { error_code: 400, description: 'Bad Request: chat not found' });
    const result = await delivery(h.plugin.outbound).file(report(), { key: 'k_7' });

    expect(result.outcome).toBe('failed');
    expect(result.error).toContain('chat not found');
    expect((await outbox())['run1:k_7:0']?.status).toBe('not-dispatched');
  });
});
