/**
 * Attacks on the operator console and the web chat from behind a reverse
 * proxy on the same machine. A default nginx `proxy_pass` makes every
 * internet client look local: the TCP peer is 127.0.0.1, `Host` is the
 * upstream's name (`127.0.0.1:<port>` or `localhost:<port>`) and no
 * forwarding header is added. Such requests must get 401 and change nothing;
 * only the secret (configured, or generated at start and printed once as a
 * login URL, never logged) lets anyone in.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type SteerbotConfig, startApp } from '../../app/index.js';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { memoryLogger } from '../helpers/memory-logger.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { launchBrowser } from '../web/harness.js';

type App = Awaited<ReturnType<typeof startApp>>;

/** One started host (no runner: nothing here needs a model), its captured login printout and log lines. */
interface Bot {
  app: App;
  prefix: string;
  port: number;
  printed: string[];
  logs: ReturnType<typeof memoryLogger>;
  stop(): Promise<void>;
}

/** Starts a host with `config` (a config file's content) and `env`; the login printout and the logs (at trace) are captured. */
async function startBot(config: Record<string, unknown> = {}, env: Record<string, string> = {}): Promise<Bot> {
  const prefix = testPrefix();
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-sec-console-'));
  const file = join(dir, 'steerbot.json');
  writeFileSync(file, JSON.stringify({ http: { host: '127.0.0.1' }, memory: { enabled: true }, ...config }));
  const loaded = await loadConfig({ file, env: { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, STEERBOT_RUNNER: 'false', ...env } });
  const full: SteerbotConfig = { ...loaded, http: { ...loaded.http, port: 0 } };
  const logs = memoryLogger({ level: 'trace' });
  const printed: string[] = [];
  const app = await startApp({ config: full, logger: logs.logger, printLogin: (text) => void printed.push(text) });
  return {
    app,
    prefix,
    port: Number(new URL(app.address!).port),
    printed,
    logs,
    async stop() {
      await cleanupPrefix(app.ctx.redis, prefix).catch(() => undefined);
      await cleanupPrefix(app.ctx.redis, bullPrefixFor(prefix)).catch(() => undefined);
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * A request exactly as nginx's default `proxy_pass http://127.0.0.1:<port>` forwards a client's: from
 * 127.0.0.1, `Host` the upstream's name, `Connection: close`, no `Forwarded` / `X-Forwarded-*`; the
 * client's own headers (content type, cookie) passed through.
 */
function viaProxy(bot: Bot, method: string, path: string, opts: { headers?: Record<string, string>; body?: unknown; host?: string } = {}): Promise<Answer> {
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: bot.port,
        method,
        path,
        headers: {
          host: opts.host ?? `127.0.0.1:${bot.port}`,
          connection: 'close',
          ...(payload !== undefined && { 'content-type': 'application/json' }),
          ...opts.headers,
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The login URL the start printed (`…/console?token=…`). */
function printedLogin(bot: Bot): URL {
  const m = /(http:\/\/\S+\/console\?token=\S+)/.exec(bot.printed.join(''));
  if (!m) throw new Error(`no login URL printed; printed: ${JSON.stringify(bot.printed)}`);
  return new URL(m[1]!);
}

/** Opens the printed login URL; returns the session cookie (`name=value`) and the answer. */
async function logIn(bot: Bot, headers: Record<string, string> = {}): Promise<{ cookie: string; res: Answer }> {
  const url = printedLogin(bot);
  const res = await viaProxy(bot, 'GET', `${url.pathname}${url.search}`, { headers });
  const set = res.headers['set-cookie'];
  const first = Array.isArray(set) ? set[0] : set;
  return { cookie: (first ?? '').split(';')[0]!, res };
}

const logKey = (bot: Bot, conversationId: string) => `${bot.prefix}:{c:${conversationId}}:log`;

const expectJsonRefusal = (res: Answer, what: string) => {
  expect(res.status, what).toBe(401);
  expect(res.headers['content-type'], what).toMatch(/^application\/json/);
  expect(typeof (JSON.parse(res.body) as { error?: unknown }).error, what).toBe('string');
};

describe('console and web chat behind a default reverse proxy (no token configured)', () => {
  let bot: Bot;
  let cookie: string;
  const VICTIM = publicConversationId('victim-conv-1');

  beforeAll(async () => {
    bot = await startBot();
    // The operator logs in and leaves a conversation and a memory note behind.
    cookie = (await logIn(bot)).cookie;
    const sent = await viaProxy(bot, 'POST', '/chat/api/messages', {
      headers: { cookie },
      body: { conversation: 'victim-conv-1', id: 'm1', text: 'my secret plans' },
    });
    expect(sent.status).toBe(200);
    const saved = await viaProxy(bot, 'POST', '/console/api/memory/save', { headers: { cookie }, body: { identity: VICTIM, text: 'likes tea' } });
    expect(saved.status).toBe(200);
  });
  afterAll(async () => {
    await bot?.stop();
  });

  it('refuses console reads, purge, link and memory edits sent the way a default nginx proxy_pass forwards them, writing nothing', async () => {
    const logBefore = await bot.app.ctx.redis.xlen(logKey(bot, VICTIM));
    expect(logBefore).toBeGreaterThan(0);
    for (const host of [`127.0.0.1:${bot.port}`, `localhost:${bot.port}`, 'localhost']) {
      const reads = [
        '/console/api/conversations',
        '/console/api/queue',
        `/console/api/conversations/${encodeURIComponent(VICTIM)}`,
        `/console/api/conversations/${encodeURIComponent(VICTIM)}/entries`,
        '/console/api/access',
        `/console/api/people/person?id=${encodeURIComponent(VICTIM)}`,
        `/console/api/memory?identity=${encodeURIComponent(VICTIM)}`,
      ];
      for (const path of reads) {
        const res = await viaProxy(bot, 'GET', path, { host });
        expectJsonRefusal(res, `GET ${path} (Host ${host})`);
        expect(res.body).not.toContain('secret plans');
        expect(res.body).not.toContain('likes tea');
      }
      const writes: Array<[string, unknown]> = [
        [`/console/api/conversations/${encodeURIComponent(VICTIM)}/actions`, { action: 'purge' }],
        [`/console/api/conversations/${encodeURIComponent(VICTIM)}/actions`, { action: 'new' }],
        ['/console/api/access/link', { account: 'web:attacker-browser', to: VICTIM }],
        ['/console/api/access/purge', { identity: VICTIM }],
        ['/console/api/memory/save', { identity: VICTIM, text: 'attacker note' }],
        ['/console/api/memory/delete', { identity: VICTIM }],
      ];
      for (const [path, body] of writes) expectJsonRefusal(await viaProxy(bot, 'POST', path, { host, body }), `POST ${path} (Host ${host})`);
    }
    // Nothing written: the record, the memory note, no trace of the attacker's account.
    expect(await bot.app.ctx.redis.xlen(logKey(bot, VICTIM))).toBe(logBefore);
    const memory = await viaProxy(bot, 'GET', `/console/api/memory?identity=${encodeURIComponent(VICTIM)}`, { headers: { cookie } });
    expect((JSON.parse(memory.body) as { notes: Array<{ text: string }> }).notes.map((n) => n.text)).toEqual(['likes tea']);
    expect((await bot.app.ctx.redis.keys(`${bot.prefix}:*`)).filter((k) => k.includes('attacker'))).toEqual([]);
  });

  it('refuses the web chat (page, messages, events) sent the way a default nginx proxy_pass forwards them, writing nothing', async () => {
    for (const path of ['/', '/chat', '/console']) {
      const page = await viaProxy(bot, 'GET', path);
      expect(page.status, path).toBe(401);
      expect(page.body, path).not.toContain('<script');
    }
    const sent = await viaProxy(bot, 'POST', '/chat/api/messages', { body: { conversation: 'attacker-conv-1', id: 'm1', text: 'spend your tokens' } });
    expectJsonRefusal(sent, 'POST /chat/api/messages');
    expectJsonRefusal(await viaProxy(bot, 'GET', '/chat/api/events', { headers: { 'x-steerbot-conversation': 'victim-conv-1' } }), 'GET /chat/api/events');
    expect(await bot.app.ctx.redis.exists(logKey(bot, publicConversationId('attacker-conv-1')))).toBe(0);
    // Nothing reached the run queue either: no model would ever be asked.
    expect((await bot.app.ctx.redis.keys(`${bot.prefix}:*${publicConversationId('attacker-conv-1')}*`)).length).toBe(0);
    expect((await bot.app.ctx.redis.keys(`${bot.prefix}:*attacker-conv-1*`)).length).toBe(0);
  });

  it('logs in with the one-time URL printed at start: an HttpOnly, SameSite=Strict cookie, then a redirect without the token', async () => {
    const url = printedLogin(bot);
    const secret = url.searchParams.get('token')!;
    expect(Buffer.from(secret, 'base64url').length).toBeGreaterThanOrEqual(16); // at least 128 bits
    const { cookie: fresh, res } = await logIn(bot);
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe('/console');
    expect(String(res.headers['set-cookie'])).toMatch(/; HttpOnly/);
    expect(String(res.headers['set-cookie'])).toMatch(/; SameSite=Strict/);
    expect(String(res.headers['set-cookie'])).not.toMatch(/; Secure/); // plain HTTP: a Secure cookie would never come back
    // The one cookie opens the console and the chat.
    expect((await viaProxy(bot, 'GET', '/console', { headers: { cookie: fresh } })).status).toBe(200);
    expect((await viaProxy(bot, 'GET', '/console/api/conversations', { headers: { cookie: fresh } })).status).toBe(200);
    expect((await viaProxy(bot, 'GET', '/', { headers: { cookie: fresh } })).status).toBe(200);
    // The chat's own login link (the same secret) works too.
    const chat = await viaProxy(bot, 'GET', `/?token=${encodeURIComponent(secret)}`);
    expect(chat.status).toBe(303);
    expect(chat.headers.location).toBe('/');
  });

  it('logs a browser in with the printed link: the console, then the chat on the same login; a fresh browser sees neither', { timeout: 60_000 }, async () => {
    const browser = await launchBrowser();
    try {
      const page = await (await browser.newContext()).newPage();
      const res = await page.goto(printedLogin(bot).href);
      expect(res?.status()).toBe(200);
      expect(page.url()).toBe(`${bot.app.address}/console`); // the secret left the URL for a cookie
      await page.goto(`${bot.app.address}/`);
      await page.waitForSelector('body[data-connected="true"]');
      const stranger = await (await browser.newContext()).newPage();
      for (const path of ['/', '/console']) {
        expect((await stranger.goto(`${bot.app.address}${path}`))?.status(), path).toBe(401);
        expect(await stranger.locator('script').count(), path).toBe(0);
      }
    } finally {
      await browser.close();
    }
  });

  it('refuses a wrong token in the login URL, as a bearer token and as a cookie', async () => {
    const wrong = 'wrong-token-0123456789abcdef';
    const link = await viaProxy(bot, 'GET', `/console?token=${wrong}`);
    expect(link.status).toBe(401);
    expect(link.headers['set-cookie']).toBeUndefined();
    expectJsonRefusal(await viaProxy(bot, 'GET', '/console/api/conversations', { headers: { authorization: `Bearer ${wrong}` } }), 'bearer');
    expectJsonRefusal(await viaProxy(bot, 'GET', '/console/api/conversations', { headers: { cookie: `steerbot_console=${wrong}` } }), 'cookie');
    expect((await viaProxy(bot, 'GET', `/?token=${wrong}`)).status).toBe(401);
  });

  it('marks the login cookie Secure when the request came over HTTPS (X-Forwarded-Proto)', async () => {
    const { res } = await logIn(bot, { 'x-forwarded-proto': 'https' });
    expect(res.status).toBe(303);
    expect(String(res.headers['set-cookie'])).toMatch(/; Secure/);
    expect(String(res.headers['set-cookie'])).toMatch(/; HttpOnly/);
    expect(String(res.headers['set-cookie'])).toMatch(/; SameSite=Strict/);
  });

  it('never writes the generated secret to the logs', async () => {
    const secret = printedLogin(bot).searchParams.get('token')!;
    expect(bot.logs.raw().length).toBeGreaterThan(0);
    expect(bot.logs.raw()).not.toContain(secret);
    expect(bot.logs.raw()).not.toContain('token=');
  });
});

describe('the console secret', () => {
  it('is new at every start when none is configured', async () => {
    const a = await startBot();
    const b = await startBot();
    try {
      const [sa, sb] = [printedLogin(a).searchParams.get('token'), printedLogin(b).searchParams.get('token')];
      expect(sa).not.toBe(sb);
      // One host's login does not open the other.
      expect((await viaProxy(b, 'GET', '/console/api/queue', { headers: { authorization: `Bearer ${sa}` } })).status).toBe(401);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('is the configured token when one is set, and then no login URL is printed', async () => {
    const TOKEN = 'operator-chosen-token-0123456789';
    const bot = await startBot({}, { STEERBOT_CONSOLE_TOKEN: TOKEN });
    try {
      expect(bot.printed.join('')).not.toContain('token=');
      expect((await viaProxy(bot, 'GET', '/console/api/queue')).status).toBe(401);
      expect((await viaProxy(bot, 'GET', '/console/api/queue', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
      expect((await viaProxy(bot, 'GET', `/?token=${TOKEN}`)).status).toBe(303);
    } finally {
      await bot.stop();
    }
  });
});

describe('opening access on purpose', () => {
  it('lets loopback clients in without a token only when console.allowLoopback is on', async () => {
    const bot = await startBot({ host: { console: { allowLoopback: true } } });
    try {
      // Direct loopback: in, console and chat.
      expect((await viaProxy(bot, 'GET', '/console/api/queue')).status).toBe(200);
      expect((await viaProxy(bot, 'GET', '/')).status).toBe(200);
      // Still refused: a proxy that says it forwarded, and a rebound host name.
      expect((await viaProxy(bot, 'GET', '/console/api/queue', { headers: { 'x-forwarded-for': '203.0.113.9' } })).status).toBe(401);
      expect((await viaProxy(bot, 'GET', '/console/api/queue', { host: `evil.example:${bot.port}` })).status).toBe(401);
      // A wrong token is refused even from loopback.
      expect((await viaProxy(bot, 'GET', '/console/api/queue', { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
    } finally {
      await bot.stop();
    }
  });

  it('a public web chat takes visitors without a login, applies the access section to them, and keeps the console closed', async () => {
    const bot = await startBot({ channels: { web: { public: true } }, access: { channels: { web: { policy: 'pairing' } } } });
    try {
      expect((await viaProxy(bot, 'GET', '/')).status).toBe(200);
      // A visitor nobody approved gets a pairing code, and nothing is recorded.
      const stranger = await viaProxy(bot, 'POST', '/chat/api/messages', { body: { conversation: 'stranger-visitor', id: 'm1', text: 'hello' } });
      expect(stranger.status).toBe(403);
      expect(await bot.app.ctx.redis.exists(logKey(bot, publicConversationId('stranger-visitor')))).toBe(0);
      // A visitor cannot approve or link from a public chat: its ids are whatever a client claims.
      const pair = await viaProxy(bot, 'POST', '/chat/api/messages', { body: { conversation: 'claims-admin', id: 'm2', text: '/pair ABCD-EFGH' } });
      expect(pair.status).not.toBe(500);
      expect(await bot.app.ctx.redis.exists(logKey(bot, publicConversationId('claims-admin')))).toBe(0);
      expectJsonRefusal(await viaProxy(bot, 'GET', '/console/api/conversations'), 'console of a public chat');
    } finally {
      await bot.stop();
    }
  });

  it('refuses to start a public web chat whose access section lists users or admins: any visitor could claim a listed id', async () => {
    await expect(
      startBot({ channels: { web: { public: true } }, access: { channels: { web: { policy: 'allowlist', users: ['listed-visitor'] } } } }),
    ).rejects.toThrow(/access\.channels\.web: this channel's senders choose their own ids/);
  });

  it('a chat-only web token opens the chat but not the console', async () => {
    const WEB = 'chat-only-token-0123456789';
    const bot = await startBot({}, { STEERBOT_WEB_TOKEN: WEB });
    try {
      const link = await viaProxy(bot, 'GET', `/?token=${WEB}`);
      expect(link.status).toBe(303);
      const cookie = String(link.headers['set-cookie']).split(';')[0]!;
      expect((await viaProxy(bot, 'GET', '/', { headers: { cookie } })).status).toBe(200);
      expectJsonRefusal(await viaProxy(bot, 'GET', '/console/api/conversations', { headers: { cookie } }), 'console with the chat cookie');
      expectJsonRefusal(
        await viaProxy(bot, 'GET', '/console/api/conversations', { headers: { authorization: `Bearer ${WEB}` } }),
        'console with the chat token',
      );
      expect((await viaProxy(bot, 'GET', `/console?token=${WEB}`)).status).toBe(401);
    } finally {
      await bot.stop();
    }
  });
});
