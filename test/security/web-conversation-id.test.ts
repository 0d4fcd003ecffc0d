/**
 * The web chat's conversation id is its visitor's bearer secret: it is also
 * the sender id, so whoever knows it reads the conversation's event stream
 * and writes as the visitor. It must never travel in a URL, where a reverse
 * proxy's access log, the browser's history and any line that prints a URL
 * keep it, nor reach the host's logs by a URL, a path or a header. A real
 * browser talks to the whole app (host and runner, the fake model) through a
 * recording reverse proxy (its access log: the request line and Referer of
 * every request), playwright records every request the page makes, and the
 * app logs at trace level.
 *
 * Not covered here: the conversation id itself is `web:<browser id>`, and ingest
 * and run log lines, run spans and console URLs name their conversation by it.
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Browser, BrowserContext, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryLogger } from '../helpers/memory-logger.js';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from '../web/harness.js';

/** The header the page names its conversation in. */
const CONVERSATION_HEADER = 'x-steerbot-conversation';

/** A reverse proxy on loopback, as nginx would be in front of the host. */
interface Proxy {
  url: string;
  /** One line per request: `"<request line>" "<Referer>"`, what nginx's `combined` log format keeps of a URL. */
  accessLog: string[];
  /** Cuts every open connection, as a proxy reload or a dropped network does. */
  cutAll(): void;
  close(): Promise<void>;
}

/** Logs the request heads of one client connection into `log` (bodies are skipped by their Content-Length). */
function requestHeadReader(log: string[]): (chunk: Buffer) => void {
  let pending = '';
  let bodyLeft = 0;
  return (chunk) => {
    pending += chunk.toString('latin1');
    for (;;) {
      const skip = Math.min(bodyLeft, pending.length);
      pending = pending.slice(skip);
      bodyLeft -= skip;
      if (bodyLeft > 0) return;
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [line, ...fields] = pending.slice(0, end).split('\r\n');
      pending = pending.slice(end + 4);
      const field = (name: string) =>
        fields
          .find((f) => f.toLowerCase().startsWith(`${name}:`))
          ?.slice(name.length + 1)
          .trim();
      log.push(`"${line}" "${field('referer') ?? '-'}"`);
      bodyLeft = Number(field('content-length') ?? 0);
    }
  };
}

/** Starts a proxy that pipes each connection to `port` on loopback. */
async function startProxy(port: number): Promise<Proxy> {
  const accessLog: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', requestHeadReader(accessLog));
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    accessLog,
    cutAll: () => {
      for (const s of sockets) s.destroy();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every key of web conversation `browserId`. */
async function conversationKeys(world: World, browserId: string): Promise<string[]> {
  return world.app.ctx.redis.keys(`${world.prefix}:*${browserId}*`);
}

describe('the web chat conversation id, a bearer secret', { timeout: 90_000 }, () => {
  let world: World;
  let logs: ReturnType<typeof memoryLogger>;
  let proxy: Proxy;
  let browser: Browser;

  beforeAll(async () => {
    logs = memoryLogger({ level: 'trace' });
    world = await startWorld(redisUrl(), {}, { logger: logs.logger });
    proxy = await startProxy(Number(new URL(world.app.address!).port));
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await world?.stop();
  });

  it('stays out of every URL the page requests, the proxy’s access log and the host’s logs, through a reconnect that resumes after the last event', async () => {
    let context: BrowserContext | undefined;
    try {
      context = await browser.newContext();
      // What crypto.getRandomValues hands the page, to tell where its id came from.
      await context.addInitScript(() => {
        const g = globalThis as any;
        const real = g.crypto.getRandomValues.bind(g.crypto);
        g.__random = [];
        g.crypto.getRandomValues = (array: Uint8Array) => {
          const out = real(array);
          g.__random.push(Array.from(out as Uint8Array));
          return out;
        };
      });
      const requests: Request[] = [];
      context.on('request', (r) => void requests.push(r));
      const page = await context.newPage();
      await page.goto(`${proxy.url}/`);
      await page.waitForSelector('body[data-connected="true"]');
      const id = (await page.evaluate(() => localStorage.getItem('steerbot.conversation')))!;
      // At least 128 bits, straight from crypto.getRandomValues.
      const random: number[][] = await page.evaluate(() => (globalThis as any).__random);
      expect(random.some((bytes) => bytes.length >= 16 && Buffer.from(bytes).toString('base64url') === id)).toBe(true);

      const say = async (text: string) => {
        await page.fill('#text', text);
        await page.press('#text', 'Enter');
        await page.locator('.msg.bot', { hasText: `reply to: ${text}` }).waitFor();
      };
      await say('first words');

      // The proxy drops every connection: the page reconnects and resumes after the last event it saw.
      const streams = () => requests.filter((r) => new URL(r.url()).pathname === '/chat/api/events');
      expect(streams()).toHaveLength(1);
      proxy.cutAll();
      await poll(() => streams().length).toBe(2);
      await page.waitForSelector('body[data-connected="true"]');
      await say('second words');
      // Nothing shown twice: the resumed stream began after the first answer.
      expect(await page.locator('.msg.bot').count()).toBe(2);
      expect(await page.locator('.msg.me').count()).toBe(2);

      // In no URL: not the browser's, not the proxy's access log, not a Referer.
      const urls = requests.map((r) => r.url());
      expect(urls.length).toBeGreaterThan(4);
      for (const url of urls) expect(url).not.toContain(id);
      for (const r of requests) expect(r.headers().referer ?? '').not.toContain(id);
      expect(await page.evaluate(() => (globalThis as any).location.href as string)).not.toContain(id);
      expect(proxy.accessLog.some((l) => l.startsWith('"GET /chat/api/events HTTP/1.1"'))).toBe(true);
      for (const line of proxy.accessLog) expect(line).not.toContain(id);
      // The session was logged (trace level): no URL, path or header put the id in a line. Ingest and run lines
      // name their conversation (`conversationId`, `web:<id>`): that field is left out here, see the file comment.
      expect(logs.lines().some((l) => l.msg === 'run ended')).toBe(true);
      expect(logs.raw().replaceAll(`"conversationId":"web:${id}"`, '')).not.toContain(id);

      // In a header instead; the reconnect resumed after the last event it saw.
      const [first, again] = await Promise.all(streams().map((r) => r.allHeaders()));
      expect(first![CONVERSATION_HEADER]).toBe(id);
      expect(first!['last-event-id']).toBeUndefined();
      expect(again![CONVERSATION_HEADER]).toBe(id);
      expect(again!['last-event-id']).toMatch(/^\d+-\d+_\d+-\d+$/);
    } finally {
      await context?.close();
    }
  });

  it('refuses a conversation id in the query string (400 naming the header), with or without the header, writing and logging nothing', async () => {
    const id = randomBytes(16).toString('base64url');
    const address = world.app.address!;
    for (const headers of [{}, { [CONVERSATION_HEADER]: id }]) {
      const res = await fetch(`${address}/chat/api/events?conversation=${id}`, { headers });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await res.json()) as { error: string }).error).toContain(CONVERSATION_HEADER);
    }
    // Without the header there is no conversation to read either.
    expect((await fetch(`${address}/chat/api/events`)).status).toBe(400);
    expect(await conversationKeys(world, id)).toEqual([]);
    expect(logs.raw()).not.toContain(id);
    // Whoever logs request headers logs the header censored (the plugin declares it secret).
    logs.logger.info({ headers: { [CONVERSATION_HEADER]: id } }, 'a request');
    expect(logs.raw()).toContain('a request');
    expect(logs.raw()).not.toContain(id);
  });
});
