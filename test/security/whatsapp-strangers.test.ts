/**
 * Strangers writing to a WhatsApp bot from many numbers to grow Redis,
 * black-box over the signed webhook against the real plugin on the real
 * channel host (access policy `pairing`, one approved person): the newest
 * message id (read receipt and typing) is kept only for messages the host
 * took in, however a stranger's messages race each other.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import { lastInboundKey } from '../../plugins/whatsapp/keys.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeWhatsApp, messageDelivery, postDelivery, startFakeWhatsApp, WA_ALICE, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });

let wa: FakeWhatsApp;
let redis: Redis;
let prefix: string;
let http: HttpServer;
let plugin: ChannelPlugin;
let url: string;

beforeEach(async () => {
  wa = await startFakeWhatsApp();
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  plugin = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl }, { logger, redis, prefix });
  const access = { channels: { whatsapp: { policy: 'pairing', users: [WA_ALICE.waId] } } };
  const { host } = ingestOnlyHost({ http, redis, prefix, logger, outbound: () => plugin.outbound, access: () => access });
  await plugin.start(host);
  url = `${await listen(http, { host: '127.0.0.1', port: 0 })}/whatsapp/webhook`;
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await cleanupPrefix(redis, prefix);
  await redis.quit();
  await wa.close();
});

const number = (i: number) => ({ waId: `1555900${String(i).padStart(4, '0')}`, name: `Stranger ${i}` });
const send = async (from: { waId: string; name: string }, text: string) => {
  const res = await postDelivery(url, messageDelivery({ from, text }));
  expect(res.status).toBe(200);
};
/** Seconds the newest message id of `waId`'s chat still lives: -2 when none is kept. */
const markerTtl = (waId: string) => redis.ttl(lastInboundKey(prefix, `whatsapp:${waId}`));

describe('whatsapp strangers', () => {
  it('leaves strangers writing from many numbers at once, /link among their messages, no newest-message key', async () => {
    const talkers = Array.from({ length: 12 }, (_, i) => number(i));
    const linkers = Array.from({ length: 4 }, (_, i) => number(100 + i));
    await Promise.all([
      ...talkers.flatMap((from) => ['hi', 'hello?', 'let me in'].map((text) => send(from, text))),
      ...linkers.flatMap((from) => ['hi', '/link'].map((text) => send(from, text))),
      send(WA_ALICE, 'hello'),
    ]);

    // Every stranger was answered (the refusal with its pairing code): nothing the bot sends needs the key.
    const answered = new Set(wa.sent.map((m) => m.to));
    for (const from of [...talkers, ...linkers]) expect(answered.has(from.waId), from.waId).toBe(true);
    for (const from of [...talkers, ...linkers]) expect(await markerTtl(from.waId), from.waId).toBe(-2);
    expect(await markerTtl(WA_ALICE.waId)).toBeGreaterThan(23 * 3600);
  });
});
