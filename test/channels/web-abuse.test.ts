/**
 * Attacks on a public web chat that lean on its ids being the browser's own
 * choice: a fresh conversation id per message (so a fresh sender, a fresh
 * pairing code, a fresh run), forged `X-Forwarded-For` headers, every event
 * stream held by one client. Each attacker is a real TCP client on its own
 * loopback address (127.0.0.x) against the whole app in this process and a
 * real Redis; a legitimate visitor on another address must still be served.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { peopleKeys } from '../../src/redis/keys.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { waitFor } from '../../testing/wait.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

/** The chat's default limits (`newConversationsPerHour`, `maxStreamsPerClient`). */
const NEW_PER_HOUR = 20;
const STREAMS_PER_CLIENT = 5;

interface Bot {
  app: RunningApp;
  prefix: string;
  port: number;
  stop(): Promise<void>;
}

/** Starts the whole app with `config` (a config file's content) and `env`. */
async function startBot(config: Record<string, unknown>, env: Record<string, string> = {}): Promise<Bot> {
  const prefix = testPrefix();
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-web-abuse-'));
  const file = join(dir, 'steerbot.json');
  writeFileSync(file, JSON.stringify({ http: { host: '127.0.0.1' }, ...config }));
  const loaded = await loadConfig({ file, env: { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `runs-${prefix}`, ...env } });
  const app = await startApp({
    config: { ...loaded, http: { ...loaded.http, port: 0 } },
    logger: createLogger({ level: 'silent' }),
    printLogin: () => undefined,
  });
  return {
    app,
    prefix,
    port: Number(new URL(app.address!).port),
    async stop() {
      await app.stop();
      await cleanupPrefix(app.ctx.redis, prefix).catch(() => undefined);
      await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix)).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Answer {
  status: number;
  body: { error?: string; result?: string; retryAfterSeconds?: number };
  retryAfter: string | undefined;
}

/** A fresh browser id, the way the page makes one. */
const freshId = () => `x${randomBytes(8).toString('hex')}`;

/** Sends one chat message from the loopback address `from`, on a connection of its own. */
function post(bot: Bot, from: string, conversation: string, text: string, headers: Record<string, string> = {}): Promise<Answer> {
  const payload = JSON.stringify({ conversation, id: 'm1', text });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: bot.port,
        localAddress: from,
        agent: false,
        method: 'POST',
        path: '/chat/api/messages',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body || '{}'), retryAfter: res.headers['retry-after'] }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** An event stream opened from `from`: its status, and a way to hang up (the stream stays open on 200). */
function openStream(bot: Bot, from: string, conversation: string): Promise<{ status: number; close(): void }> {
  return new Promise((resolve, reject) => {
    const req: ClientRequest = request(
      {
        host: '127.0.0.1',
        port: bot.port,
        localAddress: from,
        agent: false,
        path: '/chat/api/events',
        // As the page asks: the conversation id (the visitor's secret) in a header, never in the URL.
        headers: { 'x-steerbot-conversation': conversation },
      },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, close: () => req.destroy() });
      },
    );
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.end();
  });
}

/** Every key of the web conversation of browser secret `browserId`. */
async function conversationKeysOf(bot: Bot, browserId: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await bot.app.ctx.redis.scan(cursor, 'MATCH', `${bot.prefix}:{c:${publicConversationId(browserId)}}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

/** The texts the chat showed in the conversation of browser secret `browserId` (its reply stream). */
async function shown(bot: Bot, browserId: string): Promise<string[]> {
  const rows = await bot.app.ctx.redis.xrange(replyStreamKey(bot.prefix, publicConversationId(browserId)), '-', '+');
  return rows.map(([, fields]) => (JSON.parse(fields[1] ?? '{}') as { text?: string }).text ?? '');
}

/** Sends `n` messages at once from `from`, each in a fresh conversation; returns the ids and answers. */
async function flood(bot: Bot, from: string, n: number, headers: () => Record<string, string> = () => ({})) {
  const ids = Array.from({ length: n }, freshId);
  const answers = await Promise.all(ids.map((id) => post(bot, from, id, `flood ${id}`, headers())));
  return { ids, answers };
}

/** Checks a flood's answers: the first `admitted` went on with `status`, the rest got 429 with a reason and `Retry-After`; returns the refused ids. */
function expectLimited(f: Awaited<ReturnType<typeof flood>>, admitted: number, status: number): string[] {
  expect(f.answers.filter((a) => a.status === status)).toHaveLength(admitted);
  const refused = f.ids.filter((_, i) => f.answers[i]!.status === 429);
  expect(refused).toHaveLength(f.ids.length - admitted);
  for (const a of f.answers.filter((x) => x.status === 429)) {
    expect(a.body.error).toMatch(/too many new conversations from your address/);
    expect(Number(a.retryAfter)).toBeGreaterThan(0);
  }
  return refused;
}

describe('a public web chat with pairing, flooded from one address', () => {
  let bot: Bot;
  const codes = async () => bot.app.ctx.redis.zcard(peopleKeys(bot.prefix).codes);
  /** The conversations of the waiting pairing codes (the records the console lists). */
  const waitingConversations = async () => {
    const keys = peopleKeys(bot.prefix);
    const hashes = await bot.app.ctx.redis.zrange(keys.codes, '0', '-1');
    const records = hashes.length === 0 ? [] : await bot.app.ctx.redis.mget(...hashes.map((h) => keys.code(h)));
    return new Set(records.map((r) => (JSON.parse(r ?? '{}') as { conversationId?: string }).conversationId));
  };

  beforeAll(async () => {
    bot = await startBot(
      { channels: { web: { public: true, trustedProxies: ['127.0.0.1'] } }, access: { channels: { web: { policy: 'pairing' } } } },
      { STEERBOT_RUNNER: 'false' },
    );
  });
  afterAll(async () => bot?.stop());

  it('gives one address only its share of pairing codes, writes nothing for the refused, and still pairs a visitor on another address', async () => {
    const f = await flood(bot, '127.0.0.2', 3 * NEW_PER_HOUR);
    const refused = expectLimited(f, NEW_PER_HOUR, 403);
    expect(await codes()).toBe(NEW_PER_HOUR);
    const waiting = await waitingConversations();
    for (const id of refused) {
      expect(waiting.has(publicConversationId(id))).toBe(false);
      expect(await conversationKeysOf(bot, id)).toEqual([]);
    }
    // A known conversation is no new one: its next message is not refused by the limit.
    expect((await post(bot, '127.0.0.2', f.ids[f.answers.findIndex((a) => a.status === 403)]!, 'again')).status).toBe(403);

    const visitor = freshId();
    expect((await post(bot, '127.0.0.3', visitor, 'hello')).status).toBe(403);
    const notice = await waitFor(async () => (await shown(bot, visitor)).find((t) => t.includes('Your pairing code is')), 10_000, 'pairing code shown');
    expect(notice).toMatch(/\/pair [A-Z0-9-]+/);
    expect(await codes()).toBe(NEW_PER_HOUR + 1);
  });

  it('believes X-Forwarded-For only from a listed proxy, and only its right-most entry', async () => {
    // Not a listed proxy: a forged header per message changes nothing.
    const forged = await flood(bot, '127.0.0.4', NEW_PER_HOUR + 5, () => ({ 'x-forwarded-for': `198.51.100.${Math.floor(Math.random() * 250)}` }));
    for (const id of expectLimited(forged, NEW_PER_HOUR, 403)) expect(await conversationKeysOf(bot, id)).toEqual([]);

    // Through the listed proxy: what the client itself wrote left of the proxy's entry is ignored.
    const spoofed = await flood(bot, '127.0.0.1', NEW_PER_HOUR + 5, () => ({ 'x-forwarded-for': `${randomBytes(2).join('.')}.1.1, 203.0.113.7` }));
    for (const id of expectLimited(spoofed, NEW_PER_HOUR, 403)) expect(await conversationKeysOf(bot, id)).toEqual([]);

    // An IPv6 client counts by its /64: a fresh address in it per message is the same client.
    const v6 = await flood(bot, '127.0.0.1', NEW_PER_HOUR + 5, () => ({ 'x-forwarded-for': `2001:db8:7:7:${randomBytes(2).toString('hex')}::1` }));
    expectLimited(v6, NEW_PER_HOUR, 403);

    // Another client behind the same proxy is served.
    expect((await post(bot, '127.0.0.1', freshId(), 'hello', { 'x-forwarded-for': '203.0.113.8' })).status).toBe(403);
  });

  it('lets one address hold only its share of event streams, and another address still opens one', async () => {
    const ids = Array.from({ length: 30 }, freshId);
    const streams = await Promise.all(ids.map((id) => openStream(bot, '127.0.0.5', id)));
    try {
      expect(streams.filter((s) => s.status === 200)).toHaveLength(STREAMS_PER_CLIENT);
      expect(streams.filter((s) => s.status === 429)).toHaveLength(30 - STREAMS_PER_CLIENT);
      for (const id of ids) expect(await conversationKeysOf(bot, id)).toEqual([]);

      const visitor = await openStream(bot, '127.0.0.6', freshId());
      expect(visitor.status).toBe(200);
      visitor.close();

      // A stream that ends gives its place back.
      streams.find((s) => s.status === 200)!.close();
      await waitFor(
        async () => {
          const again = await openStream(bot, '127.0.0.5', freshId());
          again.close();
          return again.status === 200;
        },
        10_000,
        'a stream place given back',
      );
    } finally {
      for (const s of streams) s.close();
    }
  });
});

describe('an open public web chat, flooded from one address', () => {
  let bot: Bot;
  let model: FakeOpenAIServer;

  beforeAll(async () => {
    model = await startFakeOpenAI();
    model.script(() => ({ text: 'the answer' }));
    bot = await startBot(
      { channels: { web: { public: true } }, agents: { 'local-agent': { currentTime: false } } },
      {
        STEERBOT_MODEL_PROVIDER: 'openai-compatible',
        OPENAI_BASE_URL: model.url,
        STEERBOT_MODEL: 'fake-model',
        STEERBOT_MODEL_CONTEXT_WINDOW: '100000',
      },
    );
  });
  afterAll(async () => {
    await bot?.stop();
    await model?.close();
  });

  it('starts runs only for the new conversations one address may start, and still answers a visitor on another address', async () => {
    const f = await flood(bot, '127.0.0.2', NEW_PER_HOUR + 10);
    const refused = expectLimited(f, NEW_PER_HOUR, 200);
    expect(f.answers.filter((a) => a.status === 200).every((a) => a.body.result === 'new-run')).toBe(true);

    const visitor = freshId();
    expect((await post(bot, '127.0.0.3', visitor, 'hello there')).status).toBe(200);
    await waitFor(async () => (await shown(bot, visitor)).includes('the answer'), 20_000, 'the visitor answered');

    const prompts = model.requests.map((r) => JSON.stringify(r.body));
    for (const id of refused) {
      expect(prompts.some((p) => p.includes(`flood ${id}`))).toBe(false);
      expect(await conversationKeysOf(bot, id)).toEqual([]);
    }
  });
});
