/**
 * The webhook channel at its edges: signatures, answers and status codes,
 * nothing written for a rejected request, 503 when Redis is down, the event
 * stream, and signed callbacks with retries.
 */
import { createHmac } from 'node:crypto';
import { get, type IncomingMessage } from 'node:http';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import type { ChannelSettings } from '../../host/receive.js';
import { DUE_PAGE } from '../../plugins/webhook/callbacks.js';
import { streamToken } from '../../plugins/webhook/events.js';
import { createWebhookPlugin, type WebhookChannelConfigInput } from '../../plugins/webhook/index.js';
import { cursorKey, givenUpKey, lockKey, pendingKey } from '../../plugins/webhook/keys.js';
import { sign, signedHeaders } from '../../plugins/webhook/signature.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { freePort } from '../../src/redis/local.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-test-0123456789abcdef';
const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

interface Harness {
  url: string;
  plugin: ChannelPlugin;
  prefix: string;
  redis: Redis;
  http: HttpServer;
  settings: ChannelSettings;
  /** The `access` section the host applies (as written). */
  access: { channels: Record<string, unknown> };
}

let h: Harness;
let callbacks: CallbackServer;
const extraClients: RedisClient[] = [];

/** Starts the plugin on a real HTTP server; `hostRedis` is what the host ingests into (default: a working one). */
async function start(config: Partial<WebhookChannelConfigInput> = {}, hostRedis?: RedisClient, prefix = testPrefix(), log = logger): Promise<Harness> {
  const redis = new Redis(redisUrl());
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const ingestRedis = hostRedis ?? redis;
  const plugin = createWebhookPlugin('crm', { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 5, ...config }, { logger: log, redis, prefix });
  const settings: ChannelSettings = {};
  const access = { channels: {} };
  const { host } = ingestOnlyHost({
    http,
    redis: ingestRedis,
    prefix,
    logger,
    settings: () => settings,
    outbound: () => plugin.outbound,
    access: () => access,
  });
  await plugin.start(host);
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  return { url, plugin, prefix, redis, http, settings, access };
}

beforeEach(async () => {
  callbacks = await startCallbackServer(SECRET);
});
afterEach(async () => {
  await h.plugin.stop();
  await h.http.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
  await callbacks.close();
  for (const c of extraClients.splice(0)) c.disconnect();
});

let ids = 0;
const body = (over: Record<string, unknown> = {}) => ({ id: `m${++ids}`, conversation: 'ticket-7', sender: { id: 'u1', name: 'Ann' }, text: 'hello', ...over });

async function post(payload: unknown, headers?: Record<string, string>, path = '/webhooks/crm') {
  const raw = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const res = await fetch(`${h.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(headers ?? signedHeaders(SECRET, raw)) },
    body: raw,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Every key of the test with its type and content, to compare before/after. */
async function snapshot(): Promise<string> {
  const keys = (await h.redis.keys(`${h.prefix}:*`)).sort();
  const parts = await Promise.all(keys.map(async (k) => `${k}=${await h.redis.type(k)}:${JSON.stringify(await h.redis.dump(k))}`));
  return parts.join('\n');
}

describe('webhook channel', () => {
  describe('a signed request', () => {
    beforeEach(async () => {
      h = await start();
    });

    it('is answered 202 with the dispatch result', async () => {
      const res = await post(body());
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ result: 'new-run', seq: expect.any(Number), runId: expect.any(String) });
      const second = await post(body({ text: 'and more' }));
      expect(second).toMatchObject({ status: 202, body: { result: 'joined', runId: res.body.runId } });
    });

    it('reusing an id is a duplicate: 200, nothing new written', async () => {
      const b = body();
      const first = await post(b);
      const before = await snapshot();
      const again = await post(b);
      expect(again).toEqual({ status: 200, body: { result: 'duplicate', seq: first.body.seq } });
      expect(await snapshot()).toBe(before);
    });

    it('dedupes on the signed body id: a captured request sent again within the window with a new Idempotency-Key is a duplicate', async () => {
      const raw = JSON.stringify(body());
      const signed = signedHeaders(SECRET, raw);
      const first = await post(raw, signed);
      expect(first.status).toBe(202);
      const before = await snapshot();
      // The header is outside the signature: each replay names a fresh one, as an attacker replaying the bytes would.
      for (const key of ['replay-1', 'replay-2']) {
        expect(await post(raw, { ...signed, 'idempotency-key': key })).toEqual({ status: 200, body: { result: 'duplicate', seq: first.body.seq } });
      }
      expect(await snapshot()).toBe(before);
    });

    it('answers 403 for a sender outside the access allow-list, writing nothing to the conversation', async () => {
      h.access.channels['webhook:crm'] = { policy: 'allowlist', users: ['boss'] };
      // The gate notes the refusal for the console and the notice goes out on the reply stream; the conversation records nothing.
      const conversationKeys = async () => (await h.redis.keys(`${h.prefix}:*`)).filter((k) => k.includes('{c:') && !/:(p:|replies$)/.test(k)).sort();
      const before = await conversationKeys();
      const res = await post(body());
      expect(res.status).toBe(403);
      expect(res.body.error).toMatch(/not allowed/);
      expect(await conversationKeys()).toEqual(before);
    });

    it('runs commands and answers them on the callback', async () => {
      const res = await post(body({ text: '/queue followup' }));
      expect(res).toMatchObject({ status: 202, body: { result: 'command', command: 'queue' } });
      const [cb] = await callbacks.waitForAccepted(1);
      expect(cb!.body).toMatchObject({ conversation: 'ticket-7', text: expect.stringContaining('followup') });
    });
  });

  describe('a rejected request', () => {
    beforeEach(async () => {
      h = await start();
      await post(body()); // some state to compare against
    });

    const cases: Array<[string, () => Promise<{ status: number; body: Record<string, unknown> }>, number, RegExp]> = [
      [
        'no signature',
        () => post(JSON.stringify(body()), { 'x-steerbot-timestamp': String(Math.floor(Date.now() / 1000)) }),
        401,
        /missing x-steerbot-signature/,
      ],
      ['no timestamp', () => post(JSON.stringify(body()), { 'x-steerbot-signature': `sha256=${'0'.repeat(64)}` }), 401, /missing x-steerbot-timestamp/],
      [
        'a bad signature',
        () => {
          const raw = JSON.stringify(body());
          return post(raw, signedHeaders('some-other-secret-0123', raw));
        },
        401,
        /bad signature/,
      ],
      [
        'a signature of another body',
        () => {
          const raw = JSON.stringify(body());
          return post(raw.replace('hello', 'HELLO'), signedHeaders(SECRET, raw));
        },
        401,
        /bad signature/,
      ],
      [
        'a stale timestamp',
        () => {
          const raw = JSON.stringify(body());
          return post(raw, signedHeaders(SECRET, raw, Math.floor(Date.now() / 1000) - 301));
        },
        401,
        /stale timestamp/,
      ],
      [
        'a timestamp from the future',
        () => {
          const raw = JSON.stringify(body());
          // Well past the 300 s allowed: a second boundary crossed on the way must not bring it back inside.
          return post(raw, signedHeaders(SECRET, raw, Math.floor(Date.now() / 1000) + 310));
        },
        401,
        /stale timestamp/,
      ],
      ['malformed JSON', () => post('{"id": "x",'), 400, /not valid JSON/],
      ['no sender', () => post({ id: 'x1', conversation: 'c', text: 'hi' }), 400, /sender/],
      ['an empty text', () => post(body({ text: '  ' })), 400, /text/],
      ['a bad conversation id', () => post(body({ conversation: 'has space' })), 400, /conversation/],
      ['text over the dispatch limit', () => post(body({ text: 'x'.repeat(16_001) })), 400, /text/],
    ];
    for (const [what, send, status, error] of cases) {
      it(`with ${what} gets ${status} and leaves Redis unchanged`, async () => {
        const before = await snapshot();
        const res = await send();
        expect(res.status).toBe(status);
        expect(res.body.error).toMatch(error);
        expect(await snapshot()).toBe(before);
      });
    }

    it('over maxBodyBytes gets 413', async () => {
      await h.plugin.stop();
      await h.http.close();
      h = await start({ maxBodyBytes: 1024 });
      const res = await post(body({ text: 'x'.repeat(2000) }));
      expect(res.status).toBe(413);
      expect(res.body.error).toEqual(expect.any(String));
    });
  });

  it('answers 503 when Redis is unreachable', async () => {
    const dead = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: 0, retryStrategy: () => 50, lazyConnect: true });
    dead.on('error', () => undefined);
    extraClients.push(dead);
    h = await start({}, dead);
    const res = await post(body());
    expect(res).toEqual({ status: 503, body: { error: 'redis unreachable' } });
  });

  describe('replies', () => {
    beforeEach(async () => {
      h = await start();
    });

    it('are POSTed to the callback URL, signed, with the delivery key as message id', async () => {
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'your answer', { deliveryKey: 'r1:0', replyTo: 'm1' });
      const [cb] = await callbacks.waitForAccepted(1);
      expect(cb!.signed).toBe(true);
      expect(cb!.body).toEqual({ conversation: 'ticket-7', text: 'your answer', messageId: 'r1:0', inReplyTo: 'm1' });
      expect(cb!.headers['idempotency-key']).toBe('r1:0');
    });

    it('are stored at once, without waiting for a receiver that fails, then retried until it answers 2xx, honouring Retry-After', async () => {
      callbacks.failNext({ status: 503 }, { status: 429, retryAfter: 0 }, { status: 500 });
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'persistent');
      expect(callbacks.requests.filter((r) => r.status < 300)).toHaveLength(0);
      await callbacks.waitForAccepted(1);
      expect(callbacks.requests.map((r) => r.status)).toEqual([503, 429, 500, 200]);
      expect(new Set(callbacks.requests.map((r) => r.body.messageId)).size).toBe(1);
    });

    it('keep their order: a later reply waits while an earlier one is retried', async () => {
      callbacks.failNext({ status: 502 }, { status: 502 });
      for (const text of ['first', 'second', 'third']) await h.plugin.outbound.send('webhook:crm:ticket-7', text);
      await callbacks.waitForAccepted(3);
      expect(callbacks.texts('ticket-7')).toEqual(['first', 'second', 'third']);
      expect(callbacks.requests.map((r) => `${r.body.text}:${r.status}`)).toEqual(['first:502', 'first:502', 'first:200', 'second:200', 'third:200']);
    });

    it('give a reply up after callbackMaxAttempts (and at once when refused with a 4xx), then go on with the next', async () => {
      await h.plugin.stop();
      await h.http.close();
      await h.redis.quit();
      h = await start({ callbackMaxAttempts: 3 });
      callbacks.failNext({ status: 502 }, { status: 502 }, { status: 502 }, { status: 400 });
      for (const text of ['lost', 'refused', 'delivered']) await h.plugin.outbound.send('webhook:crm:ticket-7', text);
      await callbacks.waitForAccepted(1);
      expect(callbacks.requests.map((r) => `${r.body.text}:${r.status}`)).toEqual(['lost:502', 'lost:502', 'lost:502', 'refused:400', 'delivered:200']);
      // Both given-up replies are counted for operators (the console's stuck filter).
      await waitFor(async () => (await h.redis.hget(givenUpKey(h.prefix, 'webhook:crm:ticket-7'), 'count')) === '2' || undefined, 5000, 'given up counted');
    });

    it('are stored once per delivery key: sent again with the same key, nothing new is stored or called back', async () => {
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'once', { deliveryKey: 'r1:5:0' });
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'once, regenerated', { deliveryKey: 'r1:5:0' });
      expect((await h.redis.xrange(replyStreamKey(h.prefix, 'webhook:crm:ticket-7'), '-', '+')).length).toBe(1);
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'next', { deliveryKey: 'r1:6:0' });
      await callbacks.waitForAccepted(2);
      await waitFor(async () => (await h.redis.zcard(pendingKey(h.prefix, 'webhook:crm'))) === 0 || undefined, 5000, 'nothing pending');
      expect(callbacks.texts('ticket-7')).toEqual(['once', 'next']);
      expect((await h.redis.xrange(replyStreamKey(h.prefix, 'webhook:crm:ticket-7'), '-', '+')).length).toBe(2);
    });

    it('are marked pending again when sent again after a crash between storing and marking', async () => {
      await h.plugin.stop();
      // Stored, not marked (the sender died in between).
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'stored, never marked', { deliveryKey: 'r1:5:0' });
      await h.redis.zrem(pendingKey(h.prefix, 'webhook:crm'), 'webhook:crm:ticket-7');
      // The retried attempt sends it again: not stored twice, but marked.
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'stored, never marked', { deliveryKey: 'r1:5:0' });
      expect(await h.redis.zscore(pendingKey(h.prefix, 'webhook:crm'), 'webhook:crm:ticket-7')).toBe('0');
      const other = await start({}, undefined, h.prefix);
      try {
        await callbacks.waitForAccepted(1);
        expect(callbacks.texts('ticket-7')).toEqual(['stored, never marked']);
      } finally {
        await other.plugin.stop();
        await other.http.close();
        extraClients.push(other.redis);
      }
    });

    it(`reach every conversation when more than a poll's page (${DUE_PAGE}) is pending`, async () => {
      const n = DUE_PAGE * 2 + 50;
      // Stored while the pump is away, so all of them are pending at once.
      await h.plugin.stop();
      for (let i = 0; i < n; i++) await h.plugin.outbound.send(`webhook:crm:t${i}`, `r${i}`);
      expect(await h.redis.zcard(pendingKey(h.prefix, 'webhook:crm'))).toBe(n);
      const other = await start({}, undefined, h.prefix);
      try {
        await callbacks.waitForAccepted(n, 20_000);
        for (let i = 0; i < n; i++) expect(callbacks.texts(`t${i}`)).toEqual([`r${i}`]);
        await waitFor(async () => (await h.redis.zcard(pendingKey(h.prefix, 'webhook:crm'))) === 0 || undefined, 5000, 'nothing pending');
      } finally {
        await other.plugin.stop();
        await other.http.close();
        extraClients.push(other.redis);
      }
    });

    it('wait out a retry in the shared schedule: the conversation is not due for any host before its Retry-After', async () => {
      callbacks.failNext({ status: 503, retryAfter: 20 });
      const before = Date.now();
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'later');
      const key = pendingKey(h.prefix, 'webhook:crm');
      // While the host holds the conversation its score is the lock's expiry (30 s); after the 503, the retry time.
      const score = await waitFor(
        async () => {
          const s = Number(await h.redis.zscore(key, 'webhook:crm:ticket-7'));
          return s >= before + 19_000 && s < before + 30_000 ? s : undefined;
        },
        5000,
        'retry scheduled at the Retry-After',
      );
      expect(callbacks.requests.map((r) => r.status)).toEqual([503]);
      expect(await h.redis.zrangebyscore(key, '-inf', Date.now())).toEqual([]);
      // A second host with no memory of the failure leaves it alone too: the schedule is in Redis.
      const other = await start({}, undefined, h.prefix);
      try {
        await h.plugin.outbound.send('webhook:crm:ticket-8', 'now');
        await callbacks.waitForAccepted(1);
        expect(callbacks.requests.map((r) => `${r.body.text}:${r.status}`)).toEqual(['later:503', 'now:200']);
        expect(Number(await h.redis.zscore(key, 'webhook:crm:ticket-7'))).toBe(score);
      } finally {
        await other.plugin.stop();
        await other.http.close();
        extraClients.push(other.redis);
      }
    });

    it(`go on past a page (${DUE_PAGE}) of conversations another host holds, without touching them`, async () => {
      await h.plugin.stop();
      const key = pendingKey(h.prefix, 'webhook:crm');
      const lockOf = (c: string) => lockKey(h.prefix, c);
      // A page of due conversations whose locks another host holds for 10 s and never rescheduled (an earlier version, say).
      for (let i = 0; i < DUE_PAGE; i++) {
        await h.plugin.outbound.send(`webhook:crm:held-${i}`, `held ${i}`);
        await h.redis.set(lockOf(`webhook:crm:held-${i}`), 'another-host', 'PX', 10_000);
      }
      // Due too, but after all of them.
      await h.plugin.outbound.send('webhook:crm:free', 'free');
      await h.redis.zadd(key, 'XX', 1, 'webhook:crm:free');

      const other = await start({}, undefined, h.prefix);
      try {
        await callbacks.waitForAccepted(1, 5000);
        expect(callbacks.accepted().map((r) => r.body.text)).toEqual(['free']);
        for (let i = 0; i < DUE_PAGE; i += 33) expect(await h.redis.get(lockOf(`webhook:crm:held-${i}`))).toBe('another-host');
        expect(await h.redis.zscore(key, 'webhook:crm:held-0')).toBe('0');
      } finally {
        await other.plugin.stop();
        await other.http.close();
        extraClients.push(other.redis);
      }
    });

    it('with two hosts, go out once each and in order per conversation', async () => {
      const other = await start({}, undefined, h.prefix);
      const conversations = ['a', 'b', 'c', 'd'];
      try {
        const sends = conversations.map(async (c) => {
          for (let i = 0; i < 5; i++) await (i % 2 ? other : h).plugin.outbound.send(`webhook:crm:${c}`, `${c}${i}`, { deliveryKey: `${c}:${i}` });
        });
        // A slow receiver: a host's pass over a conversation lasts longer than the other host's poll period.
        callbacks.delay(40);
        callbacks.failNext({ status: 503 }, { status: 503 });
        await Promise.all(sends);
        await callbacks.waitForAccepted(20);
        // Every stored reply has gone out (nothing pending): no duplicate can still be on its way.
        await waitFor(async () => (await h.redis.zcard(pendingKey(h.prefix, 'webhook:crm'))) === 0 || undefined, 5000, 'nothing pending');
        for (const c of conversations) expect(callbacks.texts(c)).toEqual([0, 1, 2, 3, 4].map((i) => `${c}${i}`));
        expect(callbacks.accepted()).toHaveLength(20);
      } finally {
        await other.plugin.stop();
        await other.http.close();
        extraClients.push(other.redis);
      }
    });

    it('stop, without moving the cursor, on a host whose conversation lock was taken over by another host', async () => {
      const lines: string[] = [];
      const log = createLogger({ level: 'warn', destination: { write: (l: string) => void lines.push(l) } });
      await h.plugin.stop();
      await h.http.close();
      extraClients.push(h.redis);
      h = await start({}, undefined, h.prefix, log);
      const lock = lockKey(h.prefix, 'webhook:crm:ticket-7');
      callbacks.delay(200);
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'one');
      await waitFor(async () => (await h.redis.get(lock)) ?? undefined, 5000, 'the pump holding the lock');
      // Its lock runs out during the slow POST and another host takes the conversation.
      await h.redis.set(lock, 'another-host', 'PX', 5000);
      await callbacks.waitForAccepted(1);
      await waitFor(() => lines.some((l) => l.includes('lost the lock')) || undefined, 5000, 'the pump noticing');
      expect(await h.redis.get(cursorKey(h.prefix, 'webhook:crm:ticket-7'))).toBeNull();
      expect(await h.redis.get(lock)).toBe('another-host');
      expect(await h.redis.pttl(lock)).toBeLessThanOrEqual(5000);
    });

    it('are due again at once when a host stops in the middle of a POST, so the next host does not wait out the lock', async () => {
      // The receiver holds its answer: the POST is in flight when the host stops.
      const release = callbacks.hold();
      const key = pendingKey(h.prefix, 'webhook:crm');
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'cut off');
      // The host holds the conversation (its score is the lock's expiry, about 30 s ahead) and its POST has reached the receiver.
      await waitFor(() => callbacks.received() === 1 || undefined, 5000, 'the POST reaching the receiver');
      expect(Number(await h.redis.zscore(key, 'webhook:crm:ticket-7'))).toBeGreaterThan(Date.now() + 20_000);
      const first = h;
      await first.plugin.stop();
      await first.http.close();
      extraClients.push(first.redis);
      expect(await first.redis.zscore(key, 'webhook:crm:ticket-7')).toBe('0');
      expect(await first.redis.exists(lockKey(first.prefix, 'webhook:crm:ticket-7'))).toBe(0);

      release();
      h = await start({}, undefined, first.prefix);
      // The cut-off request is still answered by the receiver (it did not see the abort), and the next host sends it again.
      await waitFor(() => callbacks.requests.filter((r) => r.body.text === 'cut off').length >= 2 || undefined, 5000, 'sent again by the next host');
      await waitFor(async () => (await h.redis.zcard(key)) === 0 || undefined, 5000, 'nothing pending');
    });

    it('are sent by the next host to start when the receiver was down while the last one ran', async () => {
      callbacks.failNext(...Array.from({ length: 50 }, () => ({ status: 503 })));
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'kept across a restart');
      await waitFor(() => callbacks.requests.length >= 1 || undefined, 5000, 'a first attempt');
      const first = h;
      await first.plugin.stop();
      await first.http.close();
      extraClients.push(first.redis);
      const attemptsWhileDown = callbacks.requests.length;
      callbacks.clearFailures();

      // A runner's outbound (its channel is never started) only stores replies; nobody POSTs them yet.
      const runnerSide = createWebhookPlugin('crm', { secret: SECRET, callbackUrl: callbacks.url }, { logger, redis: first.redis, prefix: first.prefix });
      await runnerSide.outbound.send('webhook:crm:ticket-7', 'sent by a runner');
      expect(callbacks.requests).toHaveLength(attemptsWhileDown);

      h = await start({}, undefined, first.prefix);
      await callbacks.waitForAccepted(2);
      expect(callbacks.texts('ticket-7')).toEqual(['kept across a restart', 'sent by a runner']);
    });
  });

  describe('the event stream', () => {
    beforeEach(async () => {
      h = await start();
    });

    const eventsUrl = (conversation = 'ticket-7', query = '') => `${h.url}/webhooks/crm/conversations/${conversation}/events${query}`;

    it("streams a conversation's replies and resumes after Last-Event-ID", async () => {
      const stream = await openEvents(eventsUrl(), { authorization: `Bearer ${streamToken(SECRET, 'ticket-7')}` });
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'first');
      await h.plugin.outbound.send('webhook:crm:other', 'not for this stream');
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'second');
      const events = await stream.waitFor(2);
      stream.close();
      expect(events.map((e) => JSON.parse(e.data).text)).toEqual(['first', 'second']);
      expect(JSON.parse(events[0]!.data)).toMatchObject({ conversation: 'ticket-7', messageId: expect.any(String) });

      await h.plugin.outbound.send('webhook:crm:ticket-7', 'third');
      const resumed = await openEvents(eventsUrl(), { authorization: `Bearer ${streamToken(SECRET, 'ticket-7')}`, 'last-event-id': events[0]!.id });
      const again = await resumed.waitFor(2);
      resumed.close();
      expect(again.map((e) => JSON.parse(e.data).text)).toEqual(['second', 'third']);
    });

    it('accepts a signed query instead of the bearer stream token (for EventSource)', async () => {
      const ts = Math.floor(Date.now() / 1000);
      const stream = await openEvents(eventsUrl('ticket-7', `?ts=${ts}&sig=${encodeURIComponent(sign(SECRET, ts, 'ticket-7'))}`));
      await h.plugin.outbound.send('webhook:crm:ticket-7', 'hi');
      expect((await stream.waitFor(1)).map((e) => JSON.parse(e.data).text)).toEqual(['hi']);
      stream.close();
    });

    it('refuses a missing or wrong token, the signing secret as a bearer, a token or query for another conversation, and a stale query', async () => {
      const ts = Math.floor(Date.now() / 1000);
      const other = `sha256=${createHmac('sha256', SECRET).update(`${ts}.ticket-8`).digest('hex')}`;
      const statuses = await Promise.all([
        fetch(eventsUrl()).then((r) => r.status),
        fetch(eventsUrl(), { headers: { authorization: 'Bearer wrong-secret-000000' } }).then((r) => r.status),
        // The signing secret is not a bearer credential; nor is another conversation's stream token.
        fetch(eventsUrl(), { headers: { authorization: `Bearer ${SECRET}` } }).then((r) => r.status),
        fetch(eventsUrl(), { headers: { authorization: `Bearer ${streamToken(SECRET, 'ticket-8')}` } }).then((r) => r.status),
        fetch(eventsUrl('ticket-7', `?ts=${ts}&sig=${encodeURIComponent(other)}`)).then((r) => r.status),
        fetch(eventsUrl('ticket-7', `?ts=${ts - 1000}&sig=${encodeURIComponent(sign(SECRET, ts - 1000, 'ticket-7'))}`)).then((r) => r.status),
      ]);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 401]);
    });

    it('is ended when the plugin stops, so the server can close', async () => {
      const stream = await openEvents(eventsUrl(), { authorization: `Bearer ${streamToken(SECRET, 'ticket-7')}` });
      await h.plugin.stop();
      await stream.ended;
    });
  });

  it('admits at most maxStreamClients event streams, also when requests arrive together; a closed one frees its place', async () => {
    h = await start({ maxStreamClients: 2 });
    const url = `${h.url}/webhooks/crm/conversations/ticket-7/events`;
    const headers = { authorization: `Bearer ${streamToken(SECRET, 'ticket-7')}` };
    const aborts = Array.from({ length: 6 }, () => new AbortController());
    // A blocking command on the plugin's connection holds its reads back: all six requests are checked before any
    // stream begins (the window concurrent page loads slipped through).
    const held = h.redis.blpop(`${h.prefix}:hold`, 1);
    const responses = await Promise.all(aborts.map((ac) => fetch(url, { headers, signal: ac.signal })));
    await held;
    expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 503, 503, 503, 503]);
    for (const [i, r] of responses.entries()) if (r.status === 503) aborts[i]!.abort();
    // Close one open stream: once the server has seen it go, one more is admitted (and only one).
    aborts[responses.findIndex((r) => r.status === 200)]!.abort();
    const deadline = Date.now() + 5000;
    let next: Response | undefined;
    while (Date.now() < deadline) {
      const ac = new AbortController();
      const r = await fetch(url, { headers, signal: ac.signal });
      if (r.status === 200) {
        next = r;
        aborts.push(ac);
        break;
      }
      await r.body?.cancel();
    }
    expect(next?.status).toBe(200);
    const extra = new AbortController();
    expect((await fetch(url, { headers, signal: extra.signal })).status).toBe(503);
    for (const ac of aborts) ac.abort();
  });
});

interface SseEvent {
  id: string;
  data: string;
}

/**
 * Opens an SSE stream and parses its events. `close()` drops the connection, as a browser leaving does: a fetch
 * aborted mid-body keeps its socket until its keep-alive time runs out, which closing the server then waits for.
 */
async function openEvents(url: string, headers: Record<string, string> = {}) {
  const res = await new Promise<IncomingMessage>((resolve, reject) => get(url, { headers }, resolve).once('error', reject));
  if (res.statusCode !== 200) {
    let text = '';
    for await (const chunk of res) text += String(chunk);
    throw new Error(`event stream answered ${res.statusCode}: ${text}`);
  }
  res.setEncoding('utf8');
  const events: SseEvent[] = [];
  let notify: (() => void) | undefined;
  const ended = (async () => {
    let buffer = '';
    try {
      for await (const chunk of res as AsyncIterable<string>) {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(
            block
              .split('\n')
              .filter((l) => !l.startsWith(':'))
              .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
          );
          if (fields.data !== undefined) events.push({ id: fields.id ?? '', data: fields.data });
          notify?.();
        }
      }
    } catch {
      // destroyed by close()
    }
  })();
  return {
    events,
    ended,
    close: () => void res.destroy(),
    async waitFor(n: number, timeoutMs = 5000): Promise<SseEvent[]> {
      const deadline = Date.now() + timeoutMs;
      while (events.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`expected ${n} events within ${timeoutMs} ms, got ${events.length}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          notify = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return events.slice(0, n);
    },
  };
}
