/**
 * Replays of captured platform deliveries, as a network attacker who
 * recorded a signed request (a proxy log, a leaked capture) would send
 * them: the same bytes and headers, later. Channels whose signature carries
 * a timestamp (Slack, the webhook channel) refuse a stale one with 401;
 * channels whose signature does not (WhatsApp, the Telegram webhook) refuse
 * a delivery whose own time is older than the dedupe window less a margin,
 * with 200 (the platform must not retry) and nothing recorded, queued or sent.
 * Black box: the real plugin's routes on the host's HTTP server, the real
 * channel host over a real `Dispatch` on Redis with a short dedupe TTL (so
 * no clock is faked), runs recorded instead of executed.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { createWhatsAppPlugin } from '../../plugins/whatsapp/channel.js';
import type { ChannelDeps, ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { eventCallback, SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, signedSlackHeaders, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { ALICE, FAKE_TOKEN, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { messageDelivery, signDelivery, startFakeWhatsApp, WA_ALICE, WHATSAPP_TEST } from '../../testing/fakes/whatsapp-server.js';
import { waitFor } from '../../testing/wait.js';
import { MemoryLog } from '../channels/telegram-harness.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const TELEGRAM_SECRET = 'whsec_0123456789abcdef';
const WEBHOOK_SECRET = 'whsec-test-0123456789abcdef';
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** One host process: its HTTP server, the real channel host over a Dispatch with `dedupeTtlSeconds`, one channel. */
interface System {
  http: HttpServer;
  redis: Redis;
  prefix: string;
  log: MemoryLog;
  /** Runs the host would have queued, `[conversationId, runId]`. */
  enqueued: Array<[string, string]>;
  /** POSTs `body` (bytes as given) with `headers` to `path`. */
  post(path: string, body: string, headers: Record<string, string>): Promise<{ status: number; body: any }>;
  /** Entries of a conversation's record. */
  record(conversationId: string): Promise<number>;
  /** Every key the test wrote. */
  keys(): Promise<string[]>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startSystem(dedupeTtlSeconds: number, create: (deps: ChannelDeps) => ChannelPlugin): Promise<System> {
  const prefix = testPrefix();
  const redis = new Redis(redisUrl());
  const log = new MemoryLog();
  const logger = createLogger({ level: 'debug', destination: log });
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = create({ logger, redis, prefix });
  const dispatch = new Dispatch({ client: redis, prefix, dedupeTtlSeconds });
  const enqueued: Array<[string, string]> = [];
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis,
    prefix,
    logger,
    dispatch,
    // Ingest as the host's IngestService does, with the queue replaced by a list.
    ingest: {
      async ingest(message, opts) {
        const result = await dispatch.ingest(message, opts);
        if (result.kind === 'new-run') enqueued.push([message.conversationId, result.runId]);
        return result;
      },
    },
    enqueue: async (c, r) => void enqueued.push([c, r]),
    settings: () => plugin.settings,
    outbound: () => plugin.outbound,
    features: [],
  });
  await plugin.start(host);
  await http.ready();
  cleanups.push(async () => {
    await plugin.stop();
    await http.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });
  return {
    http,
    redis,
    prefix,
    log,
    enqueued,
    async post(path, body, headers) {
      const res = await http.inject({ method: 'POST', url: path, headers: { 'content-type': 'application/json', ...headers }, payload: body });
      return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
    },
    record: async (conversationId) => (await redis.xrange(conversationKeys(prefix, conversationId).log, '-', '+')).length,
    keys: async () => (await redis.keys(`${prefix}:*`)).sort(),
  };
}

/** Waits until no dedupe key is left: the window in which a redelivery is recognised has closed. */
const dedupeExpired = (s: System) => waitFor(async () => (await s.redis.keys(`${s.prefix}:*dedupe:*`)).length === 0, 10_000, 'dedupe keys expired', 50);

/** Value of a counter (summed over its labels matching `labels`). */
async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((sum, v) => sum + v.value, 0);
}

describe('replay of a captured delivery', () => {
  describe('whatsapp (X-Hub-Signature-256 signs no time)', () => {
    const CONVERSATION = `whatsapp:${WA_ALICE.waId}`;
    const PATH = '/whatsapp/webhook';

    async function whatsapp(dedupeTtlSeconds: number) {
      const wa = await startFakeWhatsApp();
      cleanups.push(() => wa.close());
      const s = await startSystem(dedupeTtlSeconds, (deps) => createWhatsAppPlugin({ ...WHATSAPP_TEST, graphApiUrl: wa.graphUrl }, deps));
      /** POSTs the delivery with the signature Meta would have put on these exact bytes. */
      const deliver = (body: string) => s.post(PATH, body, { 'x-hub-signature-256': signDelivery(WHATSAPP_TEST.appSecret, body) });
      return { s, wa, deliver };
    }

    /** A text message delivery whose message was sent `ageSeconds` ago (or carries no timestamp), as bytes. */
    function delivery(ageSeconds: number | undefined, text = 'refund order 1234'): string {
      const payload = messageDelivery({ text }) as any;
      const message = payload.entry[0].changes[0].value.messages[0];
      if (ageSeconds === undefined) delete message.timestamp;
      else message.timestamp = String(nowSeconds() - ageSeconds);
      return JSON.stringify(payload);
    }

    it('does not answer a captured delivery replayed after its dedupe key expired', async () => {
      // A 2 s dedupe TTL: the window closes while the test waits, as 24 h would in production.
      const { s, wa, deliver } = await whatsapp(2);
      const captured = delivery(0);
      expect((await deliver(captured)).status).toBe(200);
      expect(await s.record(CONVERSATION)).toBe(1);
      await dedupeExpired(s);

      const replay = await deliver(captured);
      expect(replay).toEqual({ status: 200, body: { ok: true, results: ['ignored:stale'] } });
      expect(await s.record(CONVERSATION)).toBe(1);
      expect(s.enqueued).toHaveLength(1);
      expect(await s.keys()).not.toContainEqual(expect.stringContaining('dedupe:'));
      expect(wa.sent).toEqual([]);
    });

    it('refuses a validly signed message older than the dedupe window less the margin, answering 200 and writing nothing', async () => {
      // dedupe TTL 600 s, margin 300 s: anything sent more than 300 s ago is too old.
      const { s, wa, deliver } = await whatsapp(600);
      const before = await counter('steerbot_whatsapp_stale_deliveries_total', { reason: 'stale' });
      const answer = await deliver(delivery(400));
      expect(answer).toEqual({ status: 200, body: { ok: true, results: ['ignored:stale'] } });
      expect(await s.keys()).toEqual([]);
      expect(s.enqueued).toEqual([]);
      expect(wa.sent).toEqual([]);
      expect(wa.reads).toEqual([]);
      expect(await counter('steerbot_whatsapp_stale_deliveries_total', { reason: 'stale' })).toBe(before + 1);
      expect(s.log.text).toMatch(/"level":30[^\n]*whatsapp message too old to be answered/);
    });

    it('answers a validly signed message sent inside the window', async () => {
      const { s, deliver } = await whatsapp(600);
      const answer = await deliver(delivery(10));
      expect(answer.status).toBe(200);
      expect(answer.body.results).toEqual(['new-run']);
      expect(await s.record(CONVERSATION)).toBe(1);
      expect(s.enqueued).toHaveLength(1);
    });

    it('refuses a validly signed message that carries no timestamp, writing nothing', async () => {
      const { s, deliver } = await whatsapp(600);
      const answer = await deliver(delivery(undefined));
      expect(answer).toEqual({ status: 200, body: { ok: true, results: ['ignored:no-timestamp'] } });
      expect(await s.keys()).toEqual([]);
      expect(s.enqueued).toEqual([]);
    });
  });

  describe('telegram webhook (a secret token header, no signed time)', () => {
    const CONVERSATION = `telegram:${ALICE.id}`;
    const PATH = '/telegram/webhook';

    async function telegram(dedupeTtlSeconds: number) {
      const fake = await startFakeTelegram();
      cleanups.push(() => fake.close());
      const s = await startSystem(dedupeTtlSeconds, (deps) =>
        createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: fake.apiRoot, mode: 'webhook', webhookSecret: TELEGRAM_SECRET }, deps),
      );
      const deliver = (body: string) => s.post(PATH, body, { 'x-telegram-bot-api-secret-token': TELEGRAM_SECRET });
      return { s, fake, deliver };
    }

    /** A message update whose message was sent `ageSeconds` ago, as bytes. */
    const update = (ageSeconds: number) => JSON.stringify(messageUpdate({ text: 'refund order 1234', extra: { date: nowSeconds() - ageSeconds } }));

    it('does not answer a captured update replayed after its dedupe key expired', async () => {
      const { s, fake, deliver } = await telegram(2);
      const captured = update(0);
      expect((await deliver(captured)).status).toBe(200);
      expect(await s.record(CONVERSATION)).toBe(1);
      await dedupeExpired(s);

      const replay = await deliver(captured);
      expect(replay).toEqual({ status: 200, body: { ok: true, ignored: 'stale' } });
      expect(await s.record(CONVERSATION)).toBe(1);
      expect(s.enqueued).toHaveLength(1);
      expect(fake.sent).toEqual([]);
    });

    it('refuses an update whose message date is older than the dedupe window less the margin, answering 200 and writing nothing', async () => {
      const { s, fake, deliver } = await telegram(600);
      const before = await counter('steerbot_telegram_stale_updates_total', { reason: 'stale' });
      const answer = await deliver(update(400));
      expect(answer).toEqual({ status: 200, body: { ok: true, ignored: 'stale' } });
      expect(await s.keys()).toEqual([]);
      expect(s.enqueued).toEqual([]);
      expect(fake.sent).toEqual([]);
      expect(await counter('steerbot_telegram_stale_updates_total', { reason: 'stale' })).toBe(before + 1);
      expect(s.log.text).toMatch(/"level":30[^\n]*telegram update too old to be answered/);
    });

    it('answers an update whose message was sent inside the window', async () => {
      const { s, deliver } = await telegram(600);
      expect(await deliver(update(10))).toEqual({ status: 200, body: { ok: true, result: 'ingested' } });
      expect(await s.record(CONVERSATION)).toBe(1);
      expect(s.enqueued).toHaveLength(1);
    });
  });

  describe('slack events api (the v0 signature signs X-Slack-Request-Timestamp)', () => {
    it('refuses with 401 a captured event replayed six minutes later with its valid signature, writing nothing', async () => {
      const slack = await startFakeSlack();
      cleanups.push(() => slack.close());
      const s = await startSystem(86_400, (deps) =>
        createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: slack.apiUrl }, deps),
      );
      const body = JSON.stringify(eventCallback({ channel: 'D0000DM1', ts: `${nowSeconds() - 360}.000100`, user: 'U0000ANN', text: 'refund order 1234' }));
      // The headers exactly as Slack sent them six minutes ago: the signature is valid for these bytes and that time.
      const captured = signedSlackHeaders(body, SLACK_SIGNING_SECRET, nowSeconds() - 360);
      const answer = await s.post('/slack/events', body, captured);
      expect(answer.status).toBe(401);
      expect(answer.body.error).toMatch(/X-Slack-Request-Timestamp is too far from now/);
      expect(await s.keys()).toEqual([]);
      expect(s.enqueued).toEqual([]);
    });

    it('refuses with 401 an event replayed inside maxSkewSeconds once the dedupe window has closed', async () => {
      const slack = await startFakeSlack();
      cleanups.push(() => slack.close());
      // A dedupe TTL (2 s) shorter than maxSkewSeconds (300 s): the accepted skew shrinks to the dedupe window.
      const s = await startSystem(2, (deps) =>
        createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: slack.apiUrl }, deps),
      );
      const body = JSON.stringify(eventCallback({ channel: 'D0000DM1', ts: `${nowSeconds()}.000100`, user: 'U0000ANN', text: 'refund order 1234' }));
      const captured = signedSlackHeaders(body);
      expect((await s.post('/slack/events', body, captured)).status).toBe(200);
      expect(await s.record('slack:D0000DM1')).toBe(1);
      await dedupeExpired(s);

      expect((await s.post('/slack/events', body, captured)).status).toBe(401);
      expect(await s.record('slack:D0000DM1')).toBe(1);
    });
  });

  describe('webhook channel (X-Steerbot-Signature signs X-Steerbot-Timestamp)', () => {
    const webhookBody = (id: string) => JSON.stringify({ id, conversation: 'ticket-7', sender: { id: 'u1', name: 'Ann' }, text: 'refund order 1234' });
    const webhook = (dedupeTtlSeconds: number) =>
      startSystem(dedupeTtlSeconds, (deps) => createWebhookPlugin('crm', { secret: WEBHOOK_SECRET }, deps) as ChannelPlugin);

    it('refuses with 401 a captured request replayed six minutes later with its valid signature, writing nothing', async () => {
      const s = await webhook(86_400);
      const body = webhookBody('m-replayed');
      const captured = signedHeaders(WEBHOOK_SECRET, body, nowSeconds() - 360);
      const answer = await s.post('/webhooks/crm', body, captured);
      expect(answer.status).toBe(401);
      expect(answer.body.error).toMatch(/stale timestamp/);
      expect(await s.keys()).toEqual([]);
      expect(s.enqueued).toEqual([]);
    });

    it('refuses with 401 a request replayed inside maxSkewSeconds once the dedupe window has closed', async () => {
      const s = await webhook(2);
      const body = webhookBody('m-captured');
      const captured = signedHeaders(WEBHOOK_SECRET, body);
      expect((await s.post('/webhooks/crm', body, captured)).status).toBe(202);
      expect(await s.record('webhook:crm:ticket-7')).toBe(1);
      await dedupeExpired(s);

      const replay = await s.post('/webhooks/crm', body, captured);
      expect(replay.status).toBe(401);
      expect(replay.body.error).toMatch(/stale timestamp/);
      expect(await s.record('webhook:crm:ticket-7')).toBe(1);
    });
  });
});
