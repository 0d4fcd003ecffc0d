/**
 * The send-and-wake API end to end: the real app (`startApp` from a config
 * file) with a Telegram channel polling the fake Bot API, a webhook channel
 * posting to the fake callback receiver, and the local agent against the
 * fake OpenAI server. Messages go out once per Idempotency-Key and the agent
 * sees them later; events wake the agent or are steered into its running turn;
 * bad requests are refused writing nothing; Redis down answers 503.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, sendMessage, startApp } from '../../app/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { createLogger } from '../../src/logger.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { telegramAppEnv } from '../helpers/app-env.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { type RestartableRedis, startRestartableRedis } from '../helpers/restartable-redis.js';

const TOKEN = 'api-token-0123456789abcdef';
const SECRET = 'whsec-api-0123456789abcdef';
const ALICE_CHAT = `telegram:${ALICE.id}`;

interface World {
  app: RunningApp;
  prefix: string;
  tg: FakeTelegram;
  openai: FakeOpenAIServer;
  callbacks: CallbackServer;
  dir: string;
}

/** The app from a config file with both channels, on a fresh prefix and queue. */
async function startWorld(redis = redisUrl()): Promise<World> {
  const [tg, openai, callbacks] = await Promise.all([startFakeTelegram(), startFakeOpenAI(), startCallbackServer(SECRET)]);
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-api-'));
  const prefix = testPrefix();
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      http: { host: '127.0.0.1' },
      channels: {
        telegram: { apiRoot: tg.apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1 },
        webhooks: { e2e: { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 } },
      },
    }),
  );
  const config = await loadConfig({
    file,
    env: {
      ...telegramAppEnv({ prefix, modelUrl: openai.url, redisUrl: redis }),
      STEERBOT_API_TOKEN: TOKEN,
    },
  });
  const app = await startApp({
    config: { ...config, http: { ...config.http, port: 0 } },
    logger: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
  return { app, prefix, tg, openai, callbacks, dir };
}

async function stopWorld(w: World | undefined): Promise<void> {
  if (!w) return;
  const redis = w.app.ctx.redis;
  if (redis.status === 'ready') {
    await cleanupPrefix(redis, w.prefix);
    await cleanupPrefix(redis, bullPrefixFor(w.prefix));
  }
  await w.app.stop();
  await Promise.all([w.tg.close(), w.openai.close(), w.callbacks.close()]);
  rmSync(w.dir, { recursive: true, force: true });
}

/** POSTs JSON to the API; `headers` over a good bearer token and JSON content type. */
async function api(w: World, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${w.app.address}/api/conversations/${encodeURIComponent(path.split('/')[0]!)}/${path.split('/')[1]}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const record = (w: World, conversationId: string) => readRange(w.app.ctx.redis, conversationKeys(w.prefix, conversationId).log);
const userContents = (w: World, i: number): unknown[] =>
  w.openai.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: unknown }) => m.content);

describe('the send-and-wake API', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
    w.openai.script((req: { messages: Array<{ role: string; content: unknown }> }) => ({
      text: `answer to ${String(req.messages.filter((m) => m.role === 'user').at(-1)?.content)}`,
    }));
  }, 30_000);
  afterAll(() => stopWorld(w));

  describe('POST /api/conversations/:id/messages', () => {
    it('delivers once per Idempotency-Key on Telegram (a chat it may open), with buttons, and the agent sees it later', async () => {
      const body = { text: 'Reminder: call Anna.', buttons: [{ label: 'Done', command: '/done' }] };
      const first = await api(w, `${ALICE_CHAT}/messages`, body, { 'idempotency-key': 'remind-1' });
      const again = await api(w, `${ALICE_CHAT}/messages`, { text: 'different words, same key' }, { 'idempotency-key': 'remind-1' });

      expect(first).toMatchObject({ status: 200, body: { duplicate: false } });
      expect(again).toMatchObject({ status: 200, body: { duplicate: true, seq: first.body.seq, messageIds: first.body.messageIds } });
      expect(w.tg.sent.filter((m) => m.chatId === ALICE.id).map((m) => [m.text, m.buttons?.map((b) => b.text)])).toEqual([['Reminder: call Anna.', ['Done']]]);
      expect((await record(w, ALICE_CHAT)).filter((e) => e.kind === 'message.sent')).toMatchObject([
        { key: 'remind-1', text: 'Reminder: call Anna.', via: 'api' },
      ]);

      const before = w.openai.requests.length;
      w.tg.pushUpdate(messageUpdate({ from: ALICE, text: 'did you remind me?' }));
      await w.tg.waitUntil(() => w.tg.sent.some((m) => m.text === 'answer to did you remind me?'), 10_000);
      const chat = w.openai.requests[before]!.body.messages.filter((m: { role: string }) => m.role !== 'system');
      expect(chat.map((m: { role: string; content: unknown }) => [m.role, m.content])).toEqual([
        ['assistant', 'Reminder: call Anna.'],
        ['user', 'did you remind me?'],
      ]);
    });

    it('sendMessage() from the package delivers to a webhook conversation once per key', async () => {
      const conversation = 'webhook:e2e:c-pkg';
      expect(await sendMessage(w.app, { conversationId: conversation, text: 'hello?', idempotencyKey: 'k0' })).toEqual({ kind: 'unknown-conversation' });
      const raw = JSON.stringify({ id: 'u1', conversation: 'c-pkg', text: 'hi', sender: { id: 'ann' } });
      const res = await fetch(`${w.app.address}/webhooks/e2e`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
        body: raw,
      });
      expect(res.status).toBe(202);
      await waitFor(() => w.callbacks.texts('c-pkg').length === 1 || undefined, 10_000, 'the answer');

      const a = await sendMessage(w.app, { conversationId: conversation, text: 'Your ticket was closed.', idempotencyKey: 'ticket-9' });
      const b = await sendMessage(w.app, { conversationId: conversation, text: 'Your ticket was closed.', idempotencyKey: 'ticket-9' });
      expect(a).toMatchObject({ kind: 'sent', duplicate: false });
      expect(b).toMatchObject({ kind: 'sent', duplicate: true, seq: (a as { seq: number }).seq });
      await waitFor(() => w.callbacks.texts('c-pkg').length === 2 || undefined, 10_000, 'the sent message');
      expect(w.callbacks.texts('c-pkg')).toEqual(['answer to hi', 'Your ticket was closed.']);
    });

    it('never sends a key twice across a purge: a pre-purge key and a key refused after it answer purged', async () => {
      const chatId = 777_001;
      const conversation = `telegram:${chatId}`;
      const sends = () => w.tg.sent.filter((m) => m.chatId === chatId).length;
      const msg = (idempotencyKey: string) => ({ conversationId: conversation, text: 'Your order shipped.', idempotencyKey });
      expect(await sendMessage(w.app, msg('order-1'))).toMatchObject({ kind: 'sent', duplicate: false });
      expect(sends()).toBe(1);

      expect(await purgeConversation(w.app.ctx.redis, w.prefix, conversation)).toMatchObject({ kind: 'purged' });
      // The key sent before the purge: its message went with the purge, the tombstone refuses a second copy.
      expect(await sendMessage(w.app, msg('order-1'))).toEqual({ kind: 'purged' });
      // A new key is refused (its dedupe value is 0), and so is its retry.
      expect(await sendMessage(w.app, msg('order-2'))).toEqual({ kind: 'purged' });
      expect(await sendMessage(w.app, msg('order-2'))).toEqual({ kind: 'purged' });
      expect((await api(w, `${conversation}/messages`, { text: 'again' }, { 'idempotency-key': 'order-2' })).status).toBe(409);
      expect(sends()).toBe(1);
    });

    it('after a restart-mode purge, a key sent before it is not delivered again', async () => {
      const chatId = 777_002;
      const conversation = `telegram:${chatId}`;
      const sends = () => w.tg.sent.filter((m) => m.chatId === chatId).map((m) => m.text);
      const msg = (text: string, idempotencyKey: string) => ({ conversationId: conversation, text, idempotencyKey });
      expect(await sendMessage(w.app, msg('first', 'r-1'))).toMatchObject({ kind: 'sent', duplicate: false });
      expect(await purgeConversation(w.app.ctx.redis, w.prefix, conversation, { afterPurge: 'restart' })).toMatchObject({ kind: 'purged' });
      // A new key starts the conversation again (the tombstone is lifted)...
      expect(await sendMessage(w.app, msg('second', 'r-2'))).toMatchObject({ kind: 'sent', duplicate: false });
      // ...and the pre-purge key, whose entry and outbox record are gone, sends nothing: its kept result answers.
      expect(await sendMessage(w.app, msg('first', 'r-1'))).toMatchObject({ kind: 'sent', duplicate: true });
      expect(sends()).toEqual(['first', 'second']);
    });

    it('refuses a bad or missing token (401), a missing key or bad body (400), an unknown conversation (404), writing nothing', async () => {
      const conversation = 'webhook:e2e:c-none';
      const good = { text: 'x' };
      expect((await api(w, `${conversation}/messages`, good, { authorization: 'Bearer wrong-token-0123456789', 'idempotency-key': 'a' })).status).toBe(401);
      expect((await api(w, `${conversation}/messages`, good, { authorization: '', 'idempotency-key': 'a' })).status).toBe(401);
      expect((await api(w, `${conversation}/messages`, good)).body).toEqual({ error: 'the Idempotency-Key header is required' });
      expect((await api(w, `${ALICE_CHAT}/messages`, { text: '' }, { 'idempotency-key': 'bad-1' })).status).toBe(400);
      expect((await api(w, `${ALICE_CHAT}/messages`, { text: 'x', extra: 1 }, { 'idempotency-key': 'bad-2' })).status).toBe(400);
      expect((await api(w, `${ALICE_CHAT}/messages`, '{not json', { 'idempotency-key': 'bad-3' })).status).toBe(400);
      expect(await api(w, `${conversation}/messages`, good, { 'idempotency-key': 'a' })).toMatchObject({ status: 404 });
      expect(await api(w, 'slack:T1/messages', good, { 'idempotency-key': 'a' })).toMatchObject({ status: 404 });

      expect(await w.app.ctx.redis.keys(`${w.prefix}:{c:${conversation}}:*`)).toEqual([]);
      const aliceKeys = await w.app.ctx.redis.keys(`${w.prefix}:{c:${ALICE_CHAT}}:*bad-*`);
      expect(aliceKeys).toEqual([]);
    });
  });

  describe('POST /api/conversations/:id/events', () => {
    it('wakes the agent in an idle conversation, marked as an event, and dedupes by id', async () => {
      const chat = 'telegram:2002';
      const event = { source: 'ci', id: 'build-41', text: 'deploy failed', data: { job: 'deploy' } };
      const before = w.openai.requests.length;
      const first = await api(w, `${chat}/events`, event);
      const again = await api(w, `${chat}/events`, event);

      expect(first).toMatchObject({ status: 202, body: { result: 'new-run' } });
      expect(again).toEqual({ status: 200, body: { result: 'duplicate', seq: first.body.seq } });
      await w.tg.waitUntil(() => w.tg.sent.find((m) => m.chatId === 2002), 10_000);
      expect(userContents(w, before)).toEqual(['[event from ci: not a message from the user]\ndeploy failed\n[data: {"job":"deploy"}]']);
      expect((await record(w, chat)).filter((e) => e.kind === 'run.started')).toHaveLength(1);
    });

    it('is steered into the running turn of the conversation', async () => {
      const chat = `telegram:${ALICE.id}`;
      w.openai.script([{ text: 'first answer', delayMs: 1500 }, { text: 'noted the event' }]);
      const before = w.openai.requests.length;
      w.tg.pushUpdate(messageUpdate({ from: ALICE, text: 'start something long' }));
      await w.openai.waitForRequests(before + 1, 10_000);

      const r = await api(w, `${chat}/events`, { source: 'monitoring', id: 'alert-7', text: 'disk almost full' });
      expect(r).toMatchObject({ status: 202, body: { result: 'steered' } });
      await w.tg.waitUntil(() => w.tg.sent.some((m) => m.text === 'noted the event'), 10_000);

      expect(userContents(w, before + 1).at(-1)).toBe('[event from monitoring: not a message from the user]\ndisk almost full');
      const started = (await record(w, chat)).filter((e) => e.kind === 'run.started' && e.run === r.body.runId);
      expect(started).toHaveLength(1);
    });

    it('refuses an unknown conversation (404) and a bad body (400) writing nothing', async () => {
      expect(await api(w, 'webhook:e2e:nobody/events', { source: 'ci', id: '1', text: 'x' })).toMatchObject({ status: 404 });
      expect(await api(w, 'telegram:3003/events', { source: 'bad source', id: '1', text: 'x' })).toMatchObject({ status: 400 });
      expect(await api(w, 'telegram:3003/events', { source: 'ci', id: '1' })).toMatchObject({ status: 400 });
      expect(await w.app.ctx.redis.keys(`${w.prefix}:{c:telegram:3003}:*`)).toEqual([]);
    });
  });
});

describe('the send-and-wake API while Redis is down', () => {
  let server: RestartableRedis;
  let w: World | undefined;
  beforeAll(async () => {
    server = await startRestartableRedis();
    w = await startWorld(server.url);
  }, 30_000);
  afterAll(async () => {
    if (!server.running) await server.start();
    await stopWorld(w);
    await server.destroy();
  });

  it('answers 503 to both routes', async () => {
    await server.stop();
    expect((await api(w!, `${ALICE_CHAT}/messages`, { text: 'x' }, { 'idempotency-key': 'k' })).status).toBe(503);
    expect((await api(w!, `${ALICE_CHAT}/events`, { source: 'ci', id: '1', text: 'x' })).status).toBe(503);
  });
});
