/**
 * The web chat's visitor secret is a bearer secret: whoever knows it reads
 * the visitor's event stream and writes as them. The page presents it on
 * every request, in a header or a body, never in a URL, where a reverse
 * proxy's access log, the browser's history and any line that prints a URL
 * keep it. Everything downstream names the visitor by the public id derived
 * from it (`plugins/web/visitor-id.ts`), so the secret reaches no log line,
 * span, Redis key name, metric or console view, and the public id, which
 * all of those show, opens nothing. A real browser talks to the whole app
 * (host and runner, the fake model) through a recording reverse proxy (its
 * access log: the request line and Referer of every request), playwright
 * records every request the page makes, the app logs at trace level, and an
 * in-memory exporter records every span.
 */
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AlwaysOnSampler, InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type { Browser, BrowserContext, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { waitFor } from '../../testing/wait.js';
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

/** Every key name under `prefix` (the app's keys, or its run queue's). */
async function keyNames(world: World, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await world.app.ctx.redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

/** Every key of the app and its run queue that names `text`. */
async function keysNaming(world: World, text: string): Promise<string[]> {
  const all = [...(await keyNames(world, world.prefix)), ...(await keyNames(world, bullPrefixFor(world.prefix)))];
  return all.filter((k) => k.includes(text));
}

/** What the event stream opened with `secret` in the header shows within `ms` (or until it shows `until`): its status and body. */
async function peekStream(world: World, secret: string, opts: { ms?: number; until?: string } = {}): Promise<{ status: number; body: string }> {
  const abort = new AbortController();
  const res = await fetch(`${world.app.address}/chat/api/events`, { headers: { [CONVERSATION_HEADER]: secret }, signal: abort.signal });
  if (res.status !== 200) return { status: res.status, body: await res.text() };
  const timer = setTimeout(() => abort.abort(), opts.ms ?? 1500);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let body = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      body += decoder.decode(value, { stream: true });
      if (opts.until !== undefined && body.includes(opts.until)) break;
    }
  } catch {
    // Aborted: the time is up.
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return { status: 200, body };
}

/** Sends one chat message with `secret` in the body. */
async function sendAs(world: World, secret: string, id: string, text: string): Promise<Response> {
  return fetch(`${world.app.address}/chat/api/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ conversation: secret, id, text }),
  });
}

/** The texts of the replies and record entries in a conversation's streams, as JSON. */
async function conversationText(world: World, conversationId: string): Promise<string> {
  const redis = world.app.ctx.redis;
  const replies = await redis.xrange(replyStreamKey(world.prefix, conversationId), '-', '+');
  const log = await redis.xrange(`${world.prefix}:{c:${conversationId}}:log`, '-', '+');
  return JSON.stringify([replies, log]);
}

// Spans are recorded from the start: the app starts no tracing SDK of its own without `OTEL_*` settings.
const spans = new InMemorySpanExporter();
const provider = new TracerProvider({ sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor({ exporter: spans })] });

describe('the web chat conversation id, a bearer secret', { timeout: 90_000 }, () => {
  let world: World;
  let logs: ReturnType<typeof memoryLogger>;
  let proxy: Proxy;
  let browser: Browser;

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    logs = memoryLogger({ level: 'trace' });
    world = await startWorld(redisUrl(), {}, { logger: logs.logger });
    proxy = await startProxy(Number(new URL(world.app.address!).port));
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await world?.stop();
    await provider.shutdown();
    trace.disable();
    context.disable();
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
      // The session was logged (trace level): no URL, path, header or field put the secret in a line. Ingest and
      // run lines name the conversation by its public id.
      expect(logs.raw()).not.toContain(id);
      expect(logs.lines().some((l) => l.msg === 'run ended' && l.conversationId === publicConversationId(id))).toBe(true);

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

  it('reaches no span, Redis key name, metric or console view, which name the visitor by its public id', async () => {
    const chat = await browser.newContext();
    const desk = await browser.newContext();
    try {
      const page = await chat.newPage();
      await page.goto(`${world.app.address}/`);
      await page.waitForSelector('body[data-connected="true"]');
      const secret = (await page.evaluate(() => localStorage.getItem('steerbot.conversation')))!;
      const id = publicConversationId(secret);
      expect(id).not.toContain(secret);
      await page.fill('#text', 'words for the operator');
      await page.press('#text', 'Enter');
      await page.locator('.msg.bot', { hasText: 'reply to: words for the operator' }).waitFor();

      // The operator's console, in a browser: the conversation's row, then its timeline.
      const operator = await desk.newPage();
      const seen: Array<Promise<string>> = [];
      operator.on('response', (r) => void seen.push(r.text().catch(() => '')));
      await operator.goto(`${world.app.address}/console`);
      await operator.locator(`tr[data-conversation="${id}"]`).waitFor();
      await operator.goto(`${world.app.address}/console#c=${encodeURIComponent(id)}`);
      await operator.locator('#timeline li[data-kind="message.received"] .text', { hasText: 'words for the operator' }).waitFor();
      await operator.locator('#timeline li[data-kind="run.ended"]').first().waitFor();
      expect(await operator.content()).not.toContain(secret);
      const shown = await Promise.all(seen);
      expect(shown.some((body) => body.includes(id))).toBe(true);
      for (const body of shown) expect(body).not.toContain(secret);

      // Every read the console offers on the conversation, the export, the people panels and the metrics.
      const api = `${world.app.address}/console/api`;
      const conversation = `${api}/conversations/${encodeURIComponent(id)}`;
      const entries = (await (await fetch(`${conversation}/entries?count=200`)).json()) as { entries: Array<{ kind: string; run?: string }> };
      const run = entries.entries.find((e) => e.kind === 'run.started')!.run!;
      for (const url of [
        `${api}/conversations`,
        `${api}/conversations?channel=web`,
        conversation,
        `${conversation}/entries?count=200`,
        `${conversation}/runs/${run}`,
        `${conversation}/schedules`,
        `${conversation}/export`,
        `${api}/queue`,
        `${api}/people/usage`,
        `${world.app.address}/metrics`,
      ]) {
        const res = await fetch(url);
        expect(res.status, url).toBe(200);
        expect(await res.text(), url).not.toContain(secret);
      }
      expect(await (await fetch(`${conversation}/export`)).text()).toContain('words for the operator');

      // Spans name the public id; none carries the secret, in a name, an attribute or an event.
      await waitFor(() => spans.getFinishedSpans().some((sp) => sp.attributes['steerbot.conversation_id'] === id), 10_000, 'a span of the conversation');
      const recorded = JSON.stringify(
        spans.getFinishedSpans().map((sp) => ({ name: sp.name, attributes: sp.attributes, events: sp.events, links: sp.links, status: sp.status })),
      );
      expect(recorded).not.toContain(secret);

      // Redis: the conversation's keys carry the public id; no key name, the run queue's included, carries the secret.
      expect((await keysNaming(world, id)).length).toBeGreaterThan(0);
      expect(await keysNaming(world, secret)).toEqual([]);
      expect(logs.raw()).not.toContain(secret);
    } finally {
      await chat.close();
      await desk.close();
    }
  });

  it('opens nothing to whoever presents the public id as the secret, in the events header or the message body: at most a new, empty conversation of its own', async () => {
    const secret = randomBytes(16).toString('base64url');
    const id = publicConversationId(secret);
    expect((await sendAs(world, secret, 'v1', 'the visitor’s own words')).status).toBe(200);
    await waitFor(async () => (await conversationText(world, id)).includes('reply to: the visitor’s own words'), 15_000, 'the visitor answered');
    // The visitor's secret opens the visitor's stream, history and all.
    expect((await peekStream(world, secret, { ms: 10_000, until: 'reply to: the visitor’s own words' })).body).toContain('the visitor’s own words');
    const before = await world.app.ctx.redis.xlen(`${world.prefix}:{c:${id}}:log`);

    // What the logs, spans and console show (`web:<public>`), its id part, and its id part without its tag.
    const tagged = id.slice('web:'.length);
    const presented = [id, tagged, tagged.slice(tagged.indexOf('.') + 1)];
    for (const [i, guess] of presented.entries()) {
      const stream = await peekStream(world, guess);
      expect([200, 400], guess).toContain(stream.status);
      expect(stream.body, guess).not.toContain('the visitor’s own words');
      const sent = await sendAs(world, guess, `a${i}`, `the attacker’s words ${i}`);
      expect([200, 400], guess).toContain(sent.status);
      // Taken: it went into the conversation of that "secret", a new one of its own, never the visitor's.
      if (sent.status === 200) {
        const own = publicConversationId(guess);
        expect(own).not.toBe(id);
        await waitFor(async () => (await conversationText(world, own)).includes(`the attacker’s words ${i}`), 10_000, 'the attacker’s own conversation');
        expect(await conversationText(world, own)).not.toContain('the visitor’s own words');
      }
    }
    // The id as it stands (`web:h.…`) and its id part (`h.…`) are no secret at all: 400.
    expect((await peekStream(world, id)).status).toBe(400);
    expect((await peekStream(world, tagged)).status).toBe(400);
    // The visitor's conversation has nothing of the attacker's.
    expect(await world.app.ctx.redis.xlen(`${world.prefix}:{c:${id}}:log`)).toBe(before);
    expect(await conversationText(world, id)).not.toContain('attacker');
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
    expect(await keysNaming(world, id)).toEqual([]);
    expect(await keysNaming(world, publicConversationId(id))).toEqual([]);
    expect(logs.raw()).not.toContain(id);
    // Whoever logs request headers logs the header censored (the plugin declares it secret).
    logs.logger.info({ headers: { [CONVERSATION_HEADER]: id } }, 'a request');
    expect(logs.raw()).toContain('a request');
    expect(logs.raw()).not.toContain(id);
  });
});
