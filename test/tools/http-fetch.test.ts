/**
 * `http_fetch` reaches public addresses only: loopback, private, link-local
 * and metadata addresses are refused after DNS resolution and on every
 * redirect, unless allow-listed; bodies and time are bounded. An HTML page
 * comes back as its readable text, other text as it is, framed as external
 * content.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type HttpFetchResult, httpFetchTool } from '../../plugins/local-agent/http-fetch.js';
import { PageReadError, readPage } from '../../plugins/local-agent/page-reader.js';
import { ToolFailure } from '../../plugins/local-agent/tool-errors.js';
import type { ResolveHost } from '../../src/http/guarded-fetch.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A local server answering with `handler`; resolves its port. */
async function serve(handler: Parameters<typeof createServer>[1]): Promise<number> {
  const s = createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

/** A DNS resolution answering from `table` (host → address). */
function fakeDns(table: Record<string, string>): ResolveHost {
  return async (host) => {
    const address = table[host];
    if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
}

const fetchWith = (url: string, opts: Parameters<typeof httpFetchTool>[0] = {}) =>
  httpFetchTool(opts).execute({ url }, { signal: AbortSignal.timeout(10_000) }) as Promise<HttpFetchResult>;

/** The text inside a result's external-content frame (after its fixed intro line and a blank line). */
const framed = (r: HttpFetchResult): string => {
  const m = /^<external-content[^>]*>\n[^\n]*\n\n([\s\S]*)\n<\/external-content>$/.exec(r.content);
  if (!m) throw new Error(`not one external-content frame: ${r.content.slice(0, 200)}`);
  return m[1]!;
};

const ARTICLE = readFileSync(new URL('./fixtures/article.html', import.meta.url), 'utf8');

async function refusal(p: Promise<unknown>): Promise<ToolFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ToolFailure);
  return err as ToolFailure;
}

describe('http_fetch', () => {
  it('refuses literal loopback, metadata and IPv6 loopback URLs without connecting', async () => {
    let hits = 0;
    const port = await serve((_q, s) => {
      hits++;
      s.end('secret');
    });
    for (const url of [
      `http://127.0.0.1:${port}/`,
      'http://169.254.169.254/latest/meta-data/',
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://[::ffff:7f00:1]:${port}/`,
    ]) {
      expect((await refusal(fetchWith(url))).category, url).toBe('forbidden');
    }
    expect(hits).toBe(0);
  });

  it('refuses a host name that resolves to a private address (checked after DNS)', async () => {
    let hits = 0;
    const port = await serve((_q, s) => {
      hits++;
      s.end('internal');
    });
    const err = await refusal(fetchWith(`http://intranet.test:${port}/`, { resolve: fakeDns({ 'intranet.test': '127.0.0.1' }) }));
    expect(err.category).toBe('forbidden');
    expect(err.message).toContain('non-public');
    expect((await refusal(fetchWith(`http://localhost:${port}/`))).category).toBe('forbidden');
    expect(hits).toBe(0);
  });

  it('fetches an allow-listed host, and refuses its redirect to a private address that is not allow-listed', async () => {
    let internalHits = 0;
    const internal = await serve((_q, s) => {
      internalHits++;
      s.end('metadata');
    });
    const port = await serve((q, s) => {
      if (q.url === '/go') return s.writeHead(302, { location: `http://metadata.test:${internal}/` }).end();
      s.end('hello from an allowed host');
    });
    const resolve = fakeDns({ 'allowed.test': '127.0.0.1', 'metadata.test': '127.0.0.1' });
    const ok = await fetchWith(`http://allowed.test:${port}/`, { allow: ['allowed.test'], resolve });
    expect(ok).toMatchObject({ status: 200, url: `http://allowed.test:${port}/`, truncated: false });
    expect(framed(ok)).toBe('hello from an allowed host');
    expect((await refusal(fetchWith(`http://allowed.test:${port}/go`, { allow: ['allowed.test'], resolve }))).category).toBe('forbidden');
    expect(internalHits).toBe(0);
  });

  it('follows a redirect between allowed addresses (CIDR allow-list) and reports where it ended', async () => {
    const port = await serve((q, s) => (q.url === '/a' ? s.writeHead(301, { location: '/b' }).end() : s.end(`at ${q.url}`)));
    const out = await fetchWith(`http://127.0.0.1:${port}/a`, { allow: ['127.0.0.0/8'] });
    expect(out).toMatchObject({ status: 200, url: `http://127.0.0.1:${port}/b` });
    expect(framed(out)).toBe('at /b');
  });

  it('stops after maxRedirects', async () => {
    const port = await serve((_q, s) => s.writeHead(302, { location: '/again' }).end());
    expect((await refusal(fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'], maxRedirects: 3 }))).category).toBe('too_many_redirects');
  });

  it('reads at most maxBytes of a large body and cuts it to maxChars', async () => {
    let sent = 0;
    const port = await serve((_q, s) => {
      const chunk = 'y'.repeat(64 * 1024);
      // Up to 8 MiB, stopped when the client goes away.
      const push = () => {
        while (sent < 8 * 1024 * 1024) {
          sent += chunk.length;
          if (!s.write(chunk)) return void s.once('drain', push);
        }
        s.end();
      };
      push();
    });
    const out = await fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'], maxBytes: 100_000, maxChars: 50_000 });
    expect(out.truncated).toBe(true);
    expect(framed(out)).toBe(`${'y'.repeat(50_000)}\n[… cut at 50000 characters]`);
    expect(sent).toBeLessThan(8 * 1024 * 1024);
  });

  it('keeps a page of markup-like text whole in its closed frame within maxChars, escaped (entities never split)', async () => {
    const port = await serve((_q, s) => s.writeHead(200, { 'content-type': 'text/plain' }).end('<b>x</b> '.repeat(5000)));
    const out = await fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'], maxChars: 1000 });
    expect(out.truncated).toBe(true);
    const body = framed(out);
    const text = body.replace(/\n\[… cut at 1000 characters\]$/, '');
    expect(text.length).toBeLessThanOrEqual(1000);
    expect(text).not.toMatch(/<|>|&[a-z]*$/);
    expect(out.content).toMatch(/<\/external-content>$/);
  });

  describe('an HTML page', () => {
    it('comes back as the readable article: title and text kept, navigation, ads, scripts, cookie banner and footer dropped', async () => {
      const port = await serve((_q, s) => s.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(ARTICLE));
      const out = await fetchWith(`http://127.0.0.1:${port}/news/seals`, { allow: ['127.0.0.1'] });
      expect(out).toMatchObject({ status: 200, url: `http://127.0.0.1:${port}/news/seals`, truncated: false });
      expect(out.content).toMatch(
        /^<external-content url="http:\/\/127\.0\.0\.1:\d+\/news\/seals" title="Harbour seals return to the estuary after 40 years">\n/,
      );
      const text = framed(out);
      // The article, in order, with its structure.
      const kept = [
        'Harbour seals have returned to breed in the Wendle estuary for the first time in four decades',
        'The colony vanished in the early 1980s',
        '## A slow recovery',
        '“We saw the first pair in 2021 and hardly dared hope,” said Dr Ines Albrecht',
        '- 212 seals counted in spring 2026, up from 58 in 2023',
        '- 31 pups, the first recorded births since 1983',
        '## Disturbance is the new threat',
        'consider seasonal limits on jet skis in the lower estuary.',
      ];
      let at = -1;
      for (const k of kept) {
        const i = text.indexOf(k);
        expect(i, k).toBeGreaterThan(at);
        at = i;
      }
      // Paragraphs on lines of their own.
      expect(text).toContain('including 31 pups.\n\nThe colony vanished');
      // No boilerplate, no script or style text, no markup.
      for (const gone of [
        'Subscribe for £1',
        'Sport',
        'Search the Ledger',
        'We use cookies',
        'Accept all',
        'ADVERTISEMENT',
        'Advertisement',
        'Mortgage rates',
        'Most read',
        'Bridge closure',
        'morning briefing',
        'All rights reserved',
        'Privacy policy',
        'gtag',
        'dataLayer',
        'adQueue',
        'tracking pixel',
        'font-family',
        'NewsArticle',
        'Share on Facebook',
      ]) {
        expect(text, gone).not.toContain(gone);
      }
      expect(text).not.toMatch(/<|>/);
      expect(text.length).toBeLessThan(3000);
    });

    it('cuts the readable text, not the markup, at maxChars', async () => {
      const port = await serve((_q, s) => s.writeHead(200, { 'content-type': 'text/html' }).end(ARTICLE));
      const out = await fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'], maxChars: 100 });
      expect(out.truncated).toBe(true);
      const first = 'Harbour seals have returned to breed in the Wendle estuary for the first time in four decades, according to';
      expect(framed(out)).toBe(`${first.slice(0, 100)}\n[… cut at 100 characters]`);
    });

    it('of a page without an article gives its body text without scripts and chrome', async () => {
      const page =
        '<html><head><title>Status</title></head><body><nav>Home | Docs</nav><p>All systems normal.</p><script>track()</script><footer>© Example</footer></body></html>';
      const port = await serve((_q, s) => s.writeHead(200, { 'content-type': 'text/html' }).end(page));
      const out = await fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'] });
      expect(out.content).toContain('title="Status"');
      expect(framed(out)).toBe('All systems normal.');
    });
  });

  describe('a crafted page', () => {
    // 2 000 nested elements, 22 KB: more than a minute of Readability and linkedom, all synchronous.
    const NESTED = `<html><body>${'<div>'.repeat(2000)}deep${'</div>'.repeat(2000)}</body></html>`;
    const page = (html: string) => serve((_q, s) => s.writeHead(200, { 'content-type': 'text/html' }).end(html));

    it('is read off the event loop, within a time limit: timers fire meanwhile, the model reads a timeout, the next page is read', async () => {
      const deep = await page(NESTED);
      const read = refusal(fetchWith(`http://127.0.0.1:${deep}/`, { allow: ['127.0.0.1'], readTimeoutMs: 1000 }));
      const timer = new Promise<string>((resolve) => setTimeout(() => resolve('timer'), 50));
      expect(await Promise.race([read.then(() => 'read'), timer])).toBe('timer');
      const err = await read;
      expect(err.category).toBe('timeout');
      expect(err.message).toContain('took more than 1000 ms to read');
      const ok = await page('<html><body><p>All systems normal.</p></body></html>');
      expect(framed(await fetchWith(`http://127.0.0.1:${ok}/`, { allow: ['127.0.0.1'] }))).toBe('All systems normal.');
    });

    it('lets a page waiting for a reader give up on an abort, and loses no place to it', async () => {
      const stuck = [1, 2].map(() =>
        readPage(NESTED, 'https://example.com/', 1500).then(
          () => 'read',
          () => 'stuck',
        ),
      );
      const ac = new AbortController();
      const waiting = readPage('<p>never read</p>', 'https://example.com/', 60_000, ac.signal).then(
        () => 'read',
        (e: unknown) => (e instanceof PageReadError ? e.message : 'other'),
      );
      ac.abort();
      expect(await Promise.race([waiting, ...stuck])).toBe('reading the page was aborted');
      expect(await Promise.all(stuck)).toEqual(['stuck', 'stuck']);
      expect((await readPage('<html><body><p>Next.</p></body></html>', 'https://example.com/', 60_000)).text).toBe('Next.');
    });

    it("does not hold another conversation's page: it is read while the crafted one is still being read", async () => {
      const deep = await page(NESTED);
      const ok = await page('<html><body><p>Still reading.</p></body></html>');
      const stuck = refusal(fetchWith(`http://127.0.0.1:${deep}/`, { allow: ['127.0.0.1'], readTimeoutMs: 2000 })).then(() => 'crafted');
      const other = fetchWith(`http://127.0.0.1:${ok}/`, { allow: ['127.0.0.1'] }).then((r) => framed(r));
      expect(await Promise.race([stuck, other])).toBe('Still reading.');
      expect(await stuck).toBe('crafted');
    });
  });

  it('returns other text as it is, in the charset the answer names, and does not show binary bodies', async () => {
    const json = '{"items":[{"id":1,"name":"Crème brûlée"}]}';
    const port = await serve((q, s) => {
      if (q.url === '/data.json') return s.writeHead(200, { 'content-type': 'application/json' }).end(json);
      if (q.url === '/latin1.txt') return s.writeHead(200, { 'content-type': 'text/plain; charset=iso-8859-1' }).end(Buffer.from('café', 'latin1'));
      s.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]));
    });
    const base = `http://127.0.0.1:${port}`;
    expect(framed(await fetchWith(`${base}/data.json`, { allow: ['127.0.0.1'] }))).toBe(json);
    expect(framed(await fetchWith(`${base}/latin1.txt`, { allow: ['127.0.0.1'] }))).toBe('café');
    expect(framed(await fetchWith(`${base}/logo.png`, { allow: ['127.0.0.1'] }))).toBe('[image/png content, 8 bytes, not shown]');
  });
});
