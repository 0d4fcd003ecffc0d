/**
 * Attacks on the send-and-wake API through its real HTTP routes: the real app
 * (`startApp` from a config file) with a Telegram channel polling the fake Bot
 * API, a webhook channel, and the local agent against the fake OpenAI server.
 *
 * - a retried send after the outbox pruned its records must not send again;
 * - a token may do only what its scopes, channels and conversations allow,
 *   at its rate, and not at all once revoked (without a restart);
 * - the webhook channel's signing secret is not a bearer credential of its event stream.
 */
import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type RunningApp, startApp } from '../../app/index.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { readRange } from '../../src/record/read.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { waitFor } from '../../testing/wait.js';
import { telegramAppEnv } from '../helpers/app-env.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { runBuiltCli } from '../helpers/cli.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-sec-0123456789abcdef';
const ALICE_CHAT = `telegram:${ALICE.id}`;
const LEGACY = 'legacy-token-0123456789abcdef';
const OPS = 'ops-token-0123456789abcdef01';
const CI = 'ci-token-0123456789abcdef0123';
const NOTIFIER = 'notifier-token-0123456789abcd';
const OPENER = 'opener-token-0123456789abcdef';
const BURST = 'burst-token-0123456789abcdef0';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

interface World {
  app: RunningApp;
  prefix: string;
  tg: FakeTelegram;
  openai: FakeOpenAIServer;
  dir: string;
  file: string;
  logs: string[];
}

/** The app from a config file (`api` is its `host.api` section), on a fresh prefix and queue. */
async function startWorld(api: Record<string, unknown>, env: Record<string, string> = {}, extra: Record<string, unknown> = {}): Promise<World> {
  const [tg, openai] = await Promise.all([startFakeTelegram(), startFakeOpenAI()]);
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-sec-api-'));
  const prefix = testPrefix();
  const file = join(dir, 'steerbot.json');
  writeFileSync(
    file,
    JSON.stringify({
      http: { host: '127.0.0.1' },
      host: { api },
      retention: { indexMaxEntries: 2 },
      channels: {
        telegram: { apiRoot: tg.apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1 },
        webhooks: { e2e: { secret: SECRET } },
      },
      ...extra,
    }),
  );
  const base = {
    ...telegramAppEnv({ prefix, modelUrl: openai.url }),
  };
  const config = await loadConfig({ file, env: { ...base, ...env } });
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger: createLogger({ level: 'warn', destination }) });
  openai.script((req: { messages: Array<{ role: string; content: unknown }> }) => ({
    text: `answer to ${String(req.messages.filter((m) => m.role === 'user').at(-1)?.content)}`,
  }));
  return { app, prefix, tg, openai, dir, file, logs };
}

async function stopWorld(w: World | undefined): Promise<void> {
  if (!w) return;
  await cleanupPrefix(w.app.ctx.redis, w.prefix);
  await cleanupPrefix(w.app.ctx.redis, bullPrefixFor(w.prefix));
  await w.app.stop();
  await Promise.all([w.tg.close(), w.openai.close()]);
  rmSync(w.dir, { recursive: true, force: true });
}

interface Answer {
  status: number;
  body: any;
  retryAfter: string | null;
}

/** POSTs JSON to `/api/conversations/<conversation>/<route>` with `token`. */
async function api(
  w: World,
  token: string,
  conversation: string,
  route: 'messages' | 'events',
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${w.app.address}/api/conversations/${encodeURIComponent(conversation)}/${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), retryAfter: res.headers.get('retry-after') };
}

const send = (w: World, token: string, conversation: string, key: string, text = 'hello') =>
  api(w, token, conversation, 'messages', { text }, { 'idempotency-key': key });
const event = (w: World, token: string, conversation: string, id: string) => api(w, token, conversation, 'events', { source: 'ci', id, text: `event ${id}` });
const keysOf = (w: World, conversation: string) => w.app.ctx.redis.keys(`${w.prefix}:{c:${conversation}}:*`);
const sentTo = (w: World, chatId: number) => w.tg.sent.filter((m) => m.chatId === chatId);

/** Runs the `steerbot` CLI with `args` against the world's config and Redis. */
const cli = (w: World, args: string[]) =>
  runBuiltCli([...args, '--config', w.file], { REDIS_URL: redisUrl(), STEERBOT_PREFIX: w.prefix, TELEGRAM_BOT_TOKEN: FAKE_TOKEN });

// The CLI runs as the package installs it (built once for the lane); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe('the send API: one Idempotency-Key, one delivery', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({}, { STEERBOT_API_TOKEN: LEGACY });
  }, 30_000);
  afterAll(() => stopWorld(w));

  it('a retry after the outbox pruned the send (indexMaxEntries newer deliveries) sends nothing and answers the original ids', async () => {
    const first = await send(w, LEGACY, ALICE_CHAT, 'invoice-77', 'Your invoice is ready.');
    expect(first).toMatchObject({ status: 200, body: { duplicate: false, messageIds: [expect.any(String)] } });

    // More newer deliveries in the conversation than `retention.indexMaxEntries` (2): the agent answers four messages.
    for (let i = 1; i <= 4; i++) {
      w.tg.pushUpdate(messageUpdate({ from: ALICE, text: `question ${i}` }));
      await w.tg.waitUntil(() => w.tg.sent.some((m) => m.text === `answer to question ${i}`), 10_000);
    }
    const outbox = await w.app.ctx.redis.hkeys(conversationKeys(w.prefix, ALICE_CHAT).outbox);
    expect(outbox.filter((k) => k.includes('invoice-77'))).toEqual([]);

    const retry = await send(w, LEGACY, ALICE_CHAT, 'invoice-77', 'Your invoice is ready.');
    expect(retry).toMatchObject({ status: 200, body: { duplicate: true, seq: first.body.seq, messageIds: first.body.messageIds } });
    expect(sentTo(w, ALICE.id).filter((m) => m.text === 'Your invoice is ready.')).toHaveLength(1);
  });

  it('refuses a button that would run /pair, /link, /purge or /forget as whoever clicks it, or whose label reads as one (400); nothing sent', async () => {
    const chat = 880_003;
    for (const command of ['/pair ABCD-EFGH', '/link ABCD-EFGH', '/purge stop', '/FORGET all', '/pair@SomeBot X']) {
      const r = await api(
        w,
        LEGACY,
        `telegram:${chat}`,
        'messages',
        { text: 'Done?', buttons: [{ label: 'Done', command }] },
        { 'idempotency-key': `b-${command}` },
      );
      expect(r.status, command).toBe(400);
      expect(r.body.error).toMatch(/a button cannot carry \/pair, \/link, \/purge or \/forget/);
    }
    // Nor a label that reads as one: a channel that echoes a tapped button's title back would hand it on as typed.
    const labelled = await api(
      w,
      LEGACY,
      `telegram:${chat}`,
      'messages',
      { text: 'Done?', buttons: [{ label: '/pair ABCD-EFGH', command: 'ok' }] },
      { 'idempotency-key': 'b-label' },
    );
    expect(labelled.status).toBe(400);
    expect(labelled.body.error).toMatch(/a button label cannot read \/pair, \/link, \/purge or \/forget/);
    expect(sentTo(w, chat)).toEqual([]);
    expect(await keysOf(w, `telegram:${chat}`)).toEqual([]);
  });

  it('two clients racing the same key get one delivery between them', async () => {
    const chat = 880_001;
    const answers = await Promise.all(Array.from({ length: 4 }, () => send(w, LEGACY, `telegram:${chat}`, 'race-1', 'once')));
    expect(sentTo(w, chat)).toHaveLength(1);
    for (const a of answers) expect([200, 409]).toContain(a.status);
    const again = await send(w, LEGACY, `telegram:${chat}`, 'race-1', 'once');
    expect(again.body).toMatchObject({ duplicate: true, messageIds: [String(sentTo(w, chat)[0]!.messageId)] });
  });

  it('the single host.api.token keeps every scope, and start-up warns naming host.api.tokens', async () => {
    expect((await event(w, LEGACY, 'telegram:880002', 'e-1')).status).toBe(202);
    expect(w.logs.join('')).toContain('host.api.tokens');
  });
});

describe('scoped API tokens', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({
      tokens: [
        { name: 'ops', token: OPS, channels: ['webhook:e2e'], scopes: ['send', 'events'] },
        { name: 'ci', tokenSha256: sha256(CI), conversations: ['telegram:2002'], scopes: ['events'] },
        { name: 'burst', token: BURST, conversations: ['telegram:2002'], scopes: ['events'], ratePerMinute: 2 },
        { name: 'notifier', token: NOTIFIER, channels: ['telegram'], scopes: ['send'] },
        { name: 'opener', token: OPENER, channels: ['telegram'], scopes: ['send', 'open'] },
      ],
    });
  }, 30_000);
  afterAll(() => stopWorld(w));

  it('a token without the send scope cannot send (403 naming the scope); nothing written or sent', async () => {
    const r = await send(w, CI, 'telegram:2002', 'k-ci');
    expect(r.status).toBe(403);
    expect(r.body.error).toContain('send');
    expect(sentTo(w, 2002)).toEqual([]);
    expect(await keysOf(w, 'telegram:2002')).toEqual([]);
  });

  it('a token cannot reach a conversation outside its channels or prefixes (403); the agent is never called', async () => {
    const calls = w.openai.requests.length;
    const outsideChannel = await event(w, OPS, 'telegram:2002', 'x-1');
    const outsidePrefix = await event(w, CI, 'telegram:20021', 'x-2');
    const otherChat = await event(w, CI, 'telegram:3003', 'x-3');
    expect([outsideChannel.status, outsidePrefix.status, otherChat.status]).toEqual([403, 403, 403]);
    expect(await keysOf(w, 'telegram:2002')).toEqual([]);
    expect(await keysOf(w, 'telegram:20021')).toEqual([]);
    expect(w.openai.requests.length).toBe(calls);
  });

  it('a token without the open scope cannot open a Telegram chat that has no record (403 naming open)', async () => {
    const r = await send(w, NOTIFIER, 'telegram:990001', 'open-1');
    expect(r.status).toBe(403);
    expect(r.body.error).toContain('open');
    const ev = await api(w, CI, 'telegram:2002', 'events', { source: 'ci', id: 'first', text: 'x' });
    expect(ev.status).toBe(403);
    expect(ev.body.error).toContain('open');
    expect(sentTo(w, 990_001)).toEqual([]);
    expect(await keysOf(w, 'telegram:990001')).toEqual([]);
  });

  it('a token with open may start a chat; one with send alone may then write to it', async () => {
    expect((await send(w, OPENER, 'telegram:990002', 'open-2', 'welcome')).status).toBe(200);
    expect((await send(w, NOTIFIER, 'telegram:990002', 'notify-1', 'news')).status).toBe(200);
    expect(sentTo(w, 990_002).map((m) => m.text)).toEqual(['welcome', 'news']);
  });

  it('over its rate a token gets 429 with Retry-After, also in a burst; nothing written for the refused ones', async () => {
    // The chat exists (the opener wrote first), so `ci` needs no open scope.
    expect((await send(w, OPENER, 'telegram:2002', 'hello-2002', 'hi')).status).toBe(200);
    const ids = ['b1', 'b2', 'b3', 'b4'];
    const burst = await Promise.all(ids.map((id) => event(w, BURST, 'telegram:2002', id)));
    const statuses = burst.map((a) => a.status).sort();
    expect(statuses).toEqual([202, 202, 429, 429]);
    for (const a of burst.filter((x) => x.status === 429)) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
    const received = (await readRange(w.app.ctx.redis, conversationKeys(w.prefix, 'telegram:2002').log)).filter((e) => e.kind === 'message.received');
    expect(received).toHaveLength(2);
    // The accepted events wake the agent: wait until it has read both, so no model call of theirs lands in a later test.
    const woken = ids.filter((_, i) => burst[i]!.status === 202);
    const read = (id: string) => w.openai.requests.some((r) => JSON.stringify(r.body.messages).includes(`\\nevent ${id}`));
    await waitFor(() => woken.every(read), 10_000, 'the agent reading the accepted events');
  });

  it('a bad token is refused with 401; the signing secret of a channel is no API token', async () => {
    expect((await send(w, 'not-a-token-0123456789', 'webhook:e2e:c1', 'k')).status).toBe(401);
    expect((await send(w, SECRET, 'webhook:e2e:c1', 'k')).status).toBe(401);
    expect((await send(w, sha256(CI), 'telegram:2002', 'k')).status).toBe(401);
  });

  it('a revoked token is refused (401) at once, without a restart; the others keep working', async () => {
    const calls = w.openai.requests.length;
    const run = await cli(w, ['revoke-token', 'notifier']);
    expect(run.err).toBe('');
    expect(run.code).toBe(0);
    const r = await send(w, NOTIFIER, 'telegram:990002', 'after-revoke', 'must not arrive');
    expect(r.status).toBe(401);
    expect(r.body.error).toContain('revoked');
    expect(sentTo(w, 990_002).map((m) => m.text)).not.toContain('must not arrive');
    expect((await send(w, OPENER, 'telegram:990002', 'still-ok', 'opener still works')).status).toBe(200);
    expect(w.openai.requests.length).toBe(calls);
  });

  it('an unknown token name is not revoked (exit 1)', async () => {
    const run = await cli(w, ['revoke-token', 'nobody']);
    expect(run.code).toBe(1);
  });
});

describe("one token's keys are its own", () => {
  const TEAM_A = 'team-a-token-0123456789abcdef';
  const TEAM_B = 'team-b-token-0123456789abcdef';
  let w: World;
  beforeAll(async () => {
    w = await startWorld({
      tokens: [
        { name: 'team-a', token: TEAM_A, channels: ['telegram'], scopes: ['send', 'events', 'open'] },
        { name: 'team-b', token: TEAM_B, channels: ['telegram'], scopes: ['send', 'events', 'open'] },
      ],
    });
  }, 30_000);
  afterAll(() => stopWorld(w));

  it("a token that takes another's Idempotency-Key first neither holds back its send nor answers for it", async () => {
    const chat = 880_201;
    // team-b guesses the key team-a will use, and sends with it first.
    const squatted = await send(w, TEAM_B, `telegram:${chat}`, 'deploy-812', 'squatted');
    expect(squatted.body).toMatchObject({ duplicate: false });
    const real = await send(w, TEAM_A, `telegram:${chat}`, 'deploy-812', 'Deploy finished.');
    expect(real.status).toBe(200);
    expect(real.body.duplicate).toBe(false);
    expect(sentTo(w, chat).map((m) => m.text)).toEqual(['squatted', 'Deploy finished.']);
    // Each token's retry answers its own delivery and sends nothing.
    const retryA = await send(w, TEAM_A, `telegram:${chat}`, 'deploy-812', 'Deploy finished.');
    const retryB = await send(w, TEAM_B, `telegram:${chat}`, 'deploy-812', 'squatted');
    expect(retryA.body).toMatchObject({ duplicate: true, messageIds: real.body.messageIds });
    expect(retryB.body).toMatchObject({ duplicate: true, messageIds: squatted.body.messageIds });
    expect(sentTo(w, chat)).toHaveLength(2);
  });

  it("a token that posts another's event source and id first does not make the real event a duplicate", async () => {
    const cid = 'telegram:880202';
    const squatted = await api(w, TEAM_B, cid, 'events', { source: 'ci', id: 'run-77', text: 'squatted' });
    expect(squatted.status).toBe(202);
    const real = await api(w, TEAM_A, cid, 'events', { source: 'ci', id: 'run-77', text: 'build 77 failed' });
    expect(real.status).toBe(202);
    const again = await api(w, TEAM_A, cid, 'events', { source: 'ci', id: 'run-77', text: 'build 77 failed' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ result: 'duplicate', seq: real.body.seq });
    const received = (await readRange(w.app.ctx.redis, conversationKeys(w.prefix, cid).log)).filter((e) => e.kind === 'message.received');
    expect(received.map((e) => e.text)).toEqual(['squatted', 'build 77 failed']);
    await waitFor(() => w.openai.requests.some((r) => JSON.stringify(r.body.messages).includes('build 77 failed')), 10_000, 'the agent reading the event');
  });

  it('an event release 0.1.0 took before the upgrade (its key unscoped) stays a duplicate for every token', async () => {
    const cid = 'telegram:880203';
    // What 0.1.0 left: the unscoped dedupe key of event ci/run-5, recorded at seq 4.
    await w.app.ctx.redis.set(conversationKeys(w.prefix, cid).dedupe('event:ci:run-5'), '4', 'EX', 600);
    const r = await api(w, TEAM_A, cid, 'events', { source: 'ci', id: 'run-5', text: 'build 5 passed' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ result: 'duplicate', seq: 4 });
    expect(await w.app.ctx.redis.exists(conversationKeys(w.prefix, cid).log)).toBe(0);
  });
});

describe("the webhook channel's event stream", () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld({}, { STEERBOT_API_TOKEN: LEGACY });
  }, 30_000);
  afterAll(() => stopWorld(w));

  const url = (w: World, conversation: string) => `${w.app.address}/webhooks/e2e/conversations/${conversation}/events`;

  it('refuses the signing secret presented as a bearer token (401)', async () => {
    const res = await fetch(url(w, 'c-1'), { headers: { authorization: `Bearer ${SECRET}` } });
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });

  it("accepts the conversation's stream token, which is not the secret and opens no other conversation", async () => {
    const token = createHmac('sha256', SECRET).update('events:c-1').digest('hex');
    const ac = new AbortController();
    const ok = await fetch(url(w, 'c-1'), { headers: { authorization: `Bearer ${token}` }, signal: ac.signal });
    expect(ok.status).toBe(200);
    ac.abort();
    const other = await fetch(url(w, 'c-2'), { headers: { authorization: `Bearer ${token}` } });
    expect(other.status).toBe(401);
    await other.body?.cancel();
  });
});

describe("an event is charged to its token's owner", () => {
  const OWNED = 'owned-token-0123456789abcdef0';
  const UNOWNED = 'unowned-token-0123456789abcde';
  let w: World;
  beforeAll(async () => {
    w = await startWorld(
      {
        tokens: [
          { name: 'alice-bot', token: OWNED, scopes: ['events', 'open'], owner: ALICE_CHAT },
          { name: 'ops', token: UNOWNED, scopes: ['events', 'open'] },
        ],
      },
      {},
      { budgets: { identity: { runsPerHour: 1 } } },
    );
  }, 30_000);
  afterAll(() => stopWorld(w));

  it("refuses a second event run once the owner's budget is spent, with no model call; an operator's event still runs", async () => {
    const chat = 880_101;
    const cid = `telegram:${chat}`;
    const record = () => readRange(w.app.ctx.redis, conversationKeys(w.prefix, cid).log);
    const ended = (n: number) =>
      waitFor(async () => (await record()).filter((e) => e.kind === 'run.ended').length >= n || undefined, 15_000, `${n} runs ended`);

    expect((await event(w, OWNED, cid, 'o-1')).status).toBe(202);
    await ended(1);
    const calls = w.openai.requests.length;
    expect(sentTo(w, chat)).toHaveLength(1);

    // The owner's one run an hour is spent: the next event's run ends on the budget before any model call.
    expect((await event(w, OWNED, cid, 'o-2')).status).toBe(202);
    await ended(2);
    expect(w.openai.requests.length).toBe(calls);
    const entries = await record();
    const runs = entries.filter((e) => e.kind === 'run.ended') as Array<{ outcome: string; reason?: string }>;
    expect(runs.map((r) => [r.outcome, r.reason ?? null])).toEqual([
      ['completed', null],
      ['failed', 'budget'],
    ]);
    const owners = entries.filter((e) => e.kind === 'message.received').map((e) => (e as { origin?: { owner?: string } }).origin?.owner);
    expect(owners).toEqual([ALICE_CHAT, ALICE_CHAT]);

    // The operator's token is charged to nobody's identity budget: its event runs.
    expect((await event(w, UNOWNED, cid, 'u-1')).status).toBe(202);
    await ended(3);
    expect(w.openai.requests.length).toBe(calls + 1);
  });
});
