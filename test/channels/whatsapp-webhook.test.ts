/**
 * The WhatsApp webhook edge and outbound side against the fake Cloud API:
 * verification, signature (401) and body (400) checks that write nothing,
 * 503 when Redis is down, status callbacks (no turns; `failed` recorded and
 * listed as a problem), the 24-hour window refusal as a typed, recorded,
 * unretried failure, rate limits as `retryAfterMs`, media downloads, reply
 * buttons, the Markdown mapping, and the newest message id the typing call
 * marks read (kept only for messages the host took in).
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import { createWhatsAppPlugin, type WhatsAppConfigInput } from '../../plugins/whatsapp/channel.js';
import { WhatsAppApiError, WindowClosedError } from '../../plugins/whatsapp/errors.js';
import { MAX_FAILURES, readFailures, recordFailure } from '../../plugins/whatsapp/failures.js';
import { takeBackLastInbound } from '../../plugins/whatsapp/inbound.js';
import whatsappDefinition from '../../plugins/whatsapp/index.js';
import { lastInboundKey } from '../../plugins/whatsapp/keys.js';
import { markdownToWhatsApp } from '../../plugins/whatsapp/markdown.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { declaredConversationKeys } from '../../src/plugin/storage.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import {
  type FakeWhatsApp,
  messageDelivery,
  signDelivery,
  startFakeWhatsApp,
  statusDelivery,
  WA_ALICE,
  WHATSAPP_TEST,
  wamid,
} from '../../testing/fakes/whatsapp-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { dispatchHost, MemoryLog, recordingHost } from './telegram-harness.js';

const CONVERSATION = `whatsapp:${WA_ALICE.waId}`;

interface Harness {
  wa: FakeWhatsApp;
  plugin: ChannelPlugin;
  host: ReturnType<typeof dispatchHost>;
  http: HttpServer;
  redis: Redis;
  prefix: string;
  log: MemoryLog;
  post(payload: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/** Starts the plugin on a channel host without a runner; `opts.access`: the `access` config section to put in front (default: none, all open). */
async function start(config: Partial<WhatsAppConfigInput> = {}, opts: { redis?: Redis; access?: unknown } = {}): Promise<Harness> {
  const prefix = testPrefix();
  const redis = opts.redis ?? new Redis(redisUrl());
  const wa = await startFakeWhatsApp();
  const log = new MemoryLog();
  const logger = createLogger({ level: 'debug', destination: log });
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl, ...config }, { logger, redis, prefix });
  const host =
    opts.access === undefined
      ? dispatchHost({ redis, prefix, http, logger, outbound: () => plugin.outbound })
      : recordingHost(ingestOnlyHost({ redis, prefix, http, logger, outbound: () => plugin.outbound, access: () => opts.access }).host);
  await plugin.start(host);
  await http.ready();
  return {
    wa,
    plugin,
    host,
    http,
    redis,
    prefix,
    log,
    async post(payload, headers) {
      const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const res = await http.inject({
        method: 'POST',
        url: '/whatsapp/webhook',
        headers: { 'content-type': 'application/json', ...(headers ?? { 'x-hub-signature-256': signDelivery(WHATSAPP_TEST.appSecret, body) }) },
        payload: body,
      });
      return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
    },
    async close() {
      await plugin.stop();
      await http.close();
      await wa.close();
      if (!opts.redis) {
        await cleanupPrefix(redis, prefix);
        await redis.quit();
      }
    },
  };
}

const keysOf = async (h: Harness) => (await h.redis.keys(`${h.prefix}:*`)).sort();

let h: Harness;
afterEach(async () => {
  await h?.close();
});

describe('whatsapp webhook', () => {
  beforeEach(async () => {
    h = await start();
  });

  it('answers the verification challenge only with the right verify token', async () => {
    const ok = await h.http.inject({
      method: 'GET',
      url: `/whatsapp/webhook?hub.mode=subscribe&hub.verify_token=${WHATSAPP_TEST.verifyToken}&hub.challenge=1158201444`,
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toBe('1158201444');
    const wrong = await h.http.inject({ method: 'GET', url: '/whatsapp/webhook?hub.mode=subscribe&hub.verify_token=nope-nope&hub.challenge=1' });
    expect(wrong.statusCode).toBe(403);
  });

  it('refuses a delivery with a bad or missing signature with 401 and writes nothing', async () => {
    const payload = messageDelivery({ text: 'hi' });
    const body = JSON.stringify(payload);
    expect((await h.post(payload, { 'x-hub-signature-256': signDelivery('another-app-secret-0000', body) })).status).toBe(401);
    expect((await h.post(payload, {})).status).toBe(401);
    // Signed over other bytes than those sent.
    expect((await h.post(`${body} `, { 'x-hub-signature-256': signDelivery(WHATSAPP_TEST.appSecret, body) })).status).toBe(401);
    expect(h.host.received).toEqual([]);
    expect(await keysOf(h)).toEqual([]);
  });

  it('refuses a malformed delivery with 400 naming the problem and writes nothing', async () => {
    const notJson = await h.post('{"object": "whatsapp_business_account", ');
    expect(notJson).toEqual({ status: 400, body: { error: 'body is not valid JSON' } });
    const wrongObject = await h.post({ object: 'page', entry: [] });
    expect(wrongObject.status).toBe(400);
    expect(wrongObject.body.error).toMatch(/^bad delivery: object/);
    const badMessage = messageDelivery({ text: 'hi' }) as any;
    badMessage.entry[0].changes[0].value.messages[0].from = 'not a number';
    const res = await h.post(badMessage);
    expect(res.status).toBe(400);
    expect(res.body.error).toContain('from');
    expect(h.host.received).toEqual([]);
    expect(await keysOf(h)).toEqual([]);
  });

  it('ingests a message once however often it is delivered', async () => {
    const payload = messageDelivery({ id: wamid(), text: 'once' });
    const results = await Promise.all([h.post(payload), h.post(payload), h.post(payload)]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const kinds = h.host.results.map((r) => (r.kind === 'ingested' ? r.result.kind : r.kind)).sort();
    expect(kinds).toEqual(['duplicate', 'duplicate', 'new-run']);
    expect(h.host.received[0]).toMatchObject({ conversationId: CONVERSATION, sender: { id: WA_ALICE.waId, name: WA_ALICE.name }, text: 'once' });
  });

  it('turns image, voice, video and document messages into attachments by media id', async () => {
    await h.post(messageDelivery({ media: { type: 'image', id: 'm-img', mimeType: 'image/jpeg', caption: 'look' } }));
    await h.post(messageDelivery({ media: { type: 'audio', id: 'm-voice', mimeType: 'audio/ogg; codecs=opus', voice: true } }));
    await h.post(messageDelivery({ media: { type: 'video', id: 'm-vid', mimeType: 'video/mp4' } }));
    await h.post(messageDelivery({ media: { type: 'document', id: 'm-doc', mimeType: 'application/pdf', filename: 'report.pdf' } }));
    expect(h.host.received.map((m) => [m.text, m.attachments])).toEqual([
      ['look', [{ kind: 'image', ref: 'm-img', mime: 'image/jpeg' }]],
      ['', [{ kind: 'audio', ref: 'm-voice', mime: 'audio/ogg; codecs=opus' }]],
      ['', [{ kind: 'video', ref: 'm-vid', mime: 'video/mp4' }]],
      ['', [{ kind: 'file', ref: 'm-doc', name: 'report.pdf', mime: 'application/pdf' }]],
    ]);
  });

  it('ignores deliveries for another phone number of the app', async () => {
    const res = await h.post(messageDelivery({ text: 'not for us', phoneNumberId: '999' }));
    expect(res).toEqual({ status: 200, body: { ok: true, results: [] } });
    expect(h.host.received).toEqual([]);
  });

  it('creates no turn for status callbacks, and records a failed one for the console', async () => {
    const sent = await h.plugin.outbound.send(CONVERSATION, 'a reply');
    for (const status of ['sent', 'delivered', 'read'] as const) expect((await h.post(statusDelivery({ messageId: sent.messageId, status }))).status).toBe(200);
    expect(h.host.received).toEqual([]);
    expect(await h.plugin.conversationProblems!(CONVERSATION)).toEqual([]);

    const failed = statusDelivery({ messageId: sent.messageId, status: 'failed', error: { code: 131026, title: 'Message undeliverable' } });
    expect((await h.post(failed)).status).toBe(200);
    expect((await h.post(failed)).status).toBe(200);
    expect(h.host.received).toEqual([]);
    expect(await h.plugin.conversationProblems!(CONVERSATION)).toEqual(['1 reply not delivered (last: 131026 Message undeliverable)']);
  });
});

describe('whatsapp outbound', () => {
  beforeEach(async () => {
    h = await start();
  });

  it('refuses a reply outside the 24-hour window with a typed error, records it, and is not retried', async () => {
    h.wa.failNext('send', { status: 400, code: 131047, message: 'Re-engagement message' });
    const err = await h.plugin.outbound.send(CONVERSATION, 'too late', { deliveryKey: 'r1:3:0' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WindowClosedError);
    expect(err).toMatchObject({ code: 'CHANNEL_API', status: 400, graphCode: 131047, retryAfterMs: undefined });
    expect(h.wa.calls.filter((c) => c.kind === 'send')).toHaveLength(1);
    expect(await h.plugin.conversationProblems!(CONVERSATION)).toEqual([
      '1 reply not delivered (last: 24-hour window closed (the user must write first, or send a template))',
    ]);
  });

  it('keeps at most MAX_FAILURES failures per conversation under concurrent failures, and a recorded one is written again', async () => {
    const ids = Array.from({ length: MAX_FAILURES + 20 }, (_, i) => `wamid.f${i}`);
    await Promise.all(ids.map((id, i) => recordFailure(h.redis, h.prefix, CONVERSATION, id, { source: 'status', title: `t${i}`, at: i })));
    const kept = await readFailures(h.redis, h.prefix, CONVERSATION);
    expect(kept).toHaveLength(MAX_FAILURES);
    const first = kept[0]!;
    await recordFailure(h.redis, h.prefix, CONVERSATION, first.id, { source: 'status', title: 'again', at: 1_000 });
    const after = await readFailures(h.redis, h.prefix, CONVERSATION);
    expect(after).toHaveLength(MAX_FAILURES);
    expect(after.find((f) => f.id === first.id)?.title).toBe('again');
  });

  it('sends a long reply with buttons as text then buttons, and a retry after the buttons failed sends the text once', async () => {
    const text = 'x'.repeat(1100);
    const buttons = [{ label: 'Approve', command: '/approve a1' }];
    h.wa.failNext('send', { status: 503, code: 2, message: 'busy' }, 1, 1);
    const err = await h.plugin.outbound.send(CONVERSATION, text, { buttons, deliveryKey: 'r1:4:0' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503 });
    // The delivery's retry, same key: only the buttons go out.
    await h.plugin.outbound.send(CONVERSATION, text, { buttons, deliveryKey: 'r1:4:0' });
    expect(h.wa.sent.map((m) => (m.type === 'text' ? 'text' : 'buttons'))).toEqual(['text', 'buttons']);
  });

  it('turns a rate limit into retryAfterMs from Retry-After, also when the API answers 400 with a rate-limit code', async () => {
    h.wa.failNext('send', { status: 429, code: 130429, retryAfterSeconds: 3 });
    expect(await h.plugin.outbound.send(CONVERSATION, 'x').catch((e: unknown) => e)).toMatchObject({ status: 429, retryAfterMs: 3000 });
    h.wa.failNext('send', { status: 400, code: 131056 });
    expect(await h.plugin.outbound.send(CONVERSATION, 'x').catch((e: unknown) => e)).toMatchObject({ status: 429, retryAfterMs: 10_000 });
    // Not failures of the reply: nothing for the console.
    expect(await h.plugin.conversationProblems!(CONVERSATION)).toEqual([]);
  });

  it('never puts the access token in an error', async () => {
    const other = await start({ graphApiUrl: 'http://127.0.0.1:1' });
    try {
      const err = (await other.plugin.outbound.send(CONVERSATION, 'x').catch((e: unknown) => e)) as WhatsAppApiError;
      expect(err).toBeInstanceOf(WhatsAppApiError);
      expect(err.message).not.toContain(WHATSAPP_TEST.accessToken);
    } finally {
      await other.close();
    }
  });

  it('sends up to three reply buttons and names the rest in the text', async () => {
    const buttons = ['one', 'two', 'three', 'four'].map((w) => ({ label: w, command: `/approve ap_${w}` }));
    await h.plugin.outbound.send(CONVERSATION, 'Pick one', { buttons });
    expect(h.wa.sent[0]).toMatchObject({
      to: WA_ALICE.waId,
      type: 'interactive',
      text: 'Pick one\n\nfour: send /approve ap_four',
      buttons: buttons.slice(0, 3).map((b) => ({ id: b.command, title: b.label })),
    });
  });

  it('maps Markdown to WhatsApp formatting when sending', async () => {
    await h.plugin.outbound.send(CONVERSATION, '## Plan\n**bold** and *it* ~~gone~~ `x*y*` [docs](https://e.x/a)\n* item', { format: 'markdown' });
    expect(h.wa.sent[0]!.text).toBe('*Plan*\n*bold* and _it_ ~gone~ `x*y*` docs (https://e.x/a)\n- item');
    expect(markdownToWhatsApp('```ts\nconst a = **b**;\n```')).toBe('```\nconst a = **b**;\n```');
  });

  it('fetches a media attachment through the media endpoint with the token', async () => {
    const bytes = Buffer.from('fake jpeg bytes');
    h.wa.addMedia('m-1', bytes, 'image/jpeg');
    const file = await h.plugin.outbound.fetchAttachment!({ kind: 'image', ref: 'm-1' }, { maxBytes: 1000 });
    expect(Buffer.from(file.data)).toEqual(bytes);
    expect(file.mediaType).toBe('image/jpeg');
    expect(h.wa.calls.map((c) => c.kind)).toEqual(['media', 'download']);
    await expect(h.plugin.outbound.fetchAttachment!({ kind: 'image', ref: 'm-1' }, { maxBytes: 4 })).rejects.toThrow(/more than 4/);
  });

  it('marks the newest message read with the typing indicator, at most once per refresh interval', async () => {
    const id = wamid();
    await h.post(messageDelivery({ id, text: 'hello' }));
    await h.plugin.outbound.typing!(CONVERSATION);
    await h.plugin.outbound.typing!(CONVERSATION);
    expect(h.wa.reads).toEqual([{ messageId: id, typing: true }]);
  });
});

describe('whatsapp webhook without Redis', () => {
  it('answers 503 so WhatsApp delivers again', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on('error', () => undefined); // the refused connection is the point of the test
    h = await start({}, { redis: dead });
    expect(await h.post(messageDelivery({ text: 'hi' }))).toEqual({ status: 503, body: { error: 'redis unreachable' } });
    expect(await h.post(statusDelivery({ messageId: wamid(), status: 'failed', error: { code: 1, title: 'x' } }))).toEqual({
      status: 503,
      body: { error: 'redis unreachable' },
    });
    dead.disconnect();
  });
});

describe('whatsapp newest message id (read receipt and typing)', () => {
  const BOB = { waId: '15550002222', name: 'Bob' };
  let marker: (waId: string) => Promise<{ id: string | null; ttl: number }>;

  beforeEach(async () => {
    h = await start({}, { access: { channels: { whatsapp: { policy: 'pairing', users: [WA_ALICE.waId] } } } });
    marker = async (waId) => {
      const key = lastInboundKey(h.prefix, `whatsapp:${waId}`);
      const [id, ttl] = await Promise.all([h.redis.get(key), h.redis.ttl(key)]);
      return { id, ttl };
    };
  });

  it("keeps an approved person's newest message id for the 24-hour window, and the typing call marks it read", async () => {
    const id = wamid();
    expect((await h.post(messageDelivery({ id, text: 'hello' }))).body.results).toEqual(['new-run']);
    const kept = await marker(WA_ALICE.waId);
    expect(kept.id).toBe(id);
    expect(kept.ttl).toBeGreaterThan(23 * 3600);
    await h.plugin.outbound.typing!(CONVERSATION);
    expect(h.wa.reads).toEqual([{ messageId: id, typing: true }]);
  });

  it("takes back only the id a message kept itself: a later message's id, taken in, keeps its day", async () => {
    const key = lastInboundKey(h.prefix, CONVERSATION);
    const question = wamid();
    // A command's id was kept, then a question's overwrote it before the command was settled.
    await h.redis.set(key, question, 'EX', 24 * 3600);
    expect(await takeBackLastInbound(h.redis, h.prefix, CONVERSATION, wamid(), 3600)).toBe(false);
    expect(await takeBackLastInbound(h.redis, h.prefix, CONVERSATION, wamid(), 0)).toBe(false);
    expect(await marker(WA_ALICE.waId)).toEqual({ id: question, ttl: expect.toSatisfy((t: number) => t > 23 * 3600) });
    // Its own id: cut to an hour at most, or deleted.
    expect(await takeBackLastInbound(h.redis, h.prefix, CONVERSATION, question, 3600)).toBe(true);
    expect((await marker(WA_ALICE.waId)).ttl).toBeLessThanOrEqual(3600);
    expect(await takeBackLastInbound(h.redis, h.prefix, CONVERSATION, question, 0)).toBe(true);
    expect(await h.redis.exists(key)).toBe(0);
  });

  it('keeps none for a sender the access rules refuse, who still gets the pairing code', async () => {
    expect((await h.post(messageDelivery({ from: BOB, text: 'hi' }))).body.results).toEqual(['ignored']);
    expect(h.wa.sent.map((m) => [m.to, m.text])).toEqual([[BOB.waId, expect.stringMatching(/pairing code/)]]);
    expect(await marker(BOB.waId)).toEqual({ id: null, ttl: -2 });
    await h.plugin.outbound.typing!(`whatsapp:${BOB.waId}`);
    expect(h.wa.reads).toEqual([]);
  });

  it("moves an approved person's id to their command and keeps it an hour at most, and a stranger's command keeps none", async () => {
    await h.post(messageDelivery({ text: 'hello' }));
    const status = wamid();
    expect((await h.post(messageDelivery({ id: status, text: '/status' }))).body.results).toEqual(['command']);
    const moved = await marker(WA_ALICE.waId);
    expect(moved.id).toBe(status);
    expect(moved.ttl).toBeGreaterThan(0);
    expect(moved.ttl).toBeLessThanOrEqual(3600);

    // The host refuses a stranger's command (answered, nothing taken in).
    expect((await h.post(messageDelivery({ from: BOB, text: '/link' }))).body.results).toEqual(['ignored']);
    expect(await marker(BOB.waId)).toEqual({ id: null, ttl: -2 });
  });

  it('keeps none for a message to a purged conversation', async () => {
    await h.post(messageDelivery({ text: 'hello' }));
    // The message's run was only queued (no runner here): the purge stops it.
    const pluginKeys = declaredConversationKeys([whatsappDefinition]);
    const purged = await purgeConversation(h.redis, h.prefix, CONVERSATION, { pluginKeys, stopActive: true });
    expect(purged.kind).toBe('purged');
    expect(await marker(WA_ALICE.waId)).toEqual({ id: null, ttl: -2 });
    expect((await h.post(messageDelivery({ text: 'are you there?' }))).body.results).toEqual(['purged']);
    expect(await marker(WA_ALICE.waId)).toEqual({ id: null, ttl: -2 });
  });
});
