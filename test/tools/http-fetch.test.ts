/**
 * `http_fetch` reaches public addresses only: loopback, private, link-local
 * and metadata addresses are refused after DNS resolution and on every
 * redirect, unless allow-listed; bodies and time are bounded.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { httpFetchTool } from '../../plugins/local-agent/http-fetch.js';
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
  httpFetchTool(opts).execute({ url }, { signal: AbortSignal.timeout(10_000) });

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
    expect(await fetchWith(`http://allowed.test:${port}/`, { allow: ['allowed.test'], resolve })).toEqual({ status: 200, body: 'hello from an allowed host' });
    expect((await refusal(fetchWith(`http://allowed.test:${port}/go`, { allow: ['allowed.test'], resolve }))).category).toBe('forbidden');
    expect(internalHits).toBe(0);
  });

  it('follows a redirect between allowed addresses (CIDR allow-list) and reports where it ended', async () => {
    const port = await serve((q, s) => (q.url === '/a' ? s.writeHead(301, { location: '/b' }).end() : s.end(`at ${q.url}`)));
    expect(await fetchWith(`http://127.0.0.1:${port}/a`, { allow: ['127.0.0.0/8'] })).toEqual({
      status: 200,
      url: `http://127.0.0.1:${port}/b`,
      body: 'at /b',
    });
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
    const out = (await fetchWith(`http://127.0.0.1:${port}/`, { allow: ['127.0.0.1'], maxBytes: 100_000, maxChars: 50_000 })) as { body: string };
    expect(out.body).toBe(`${'y'.repeat(50_000)}…[truncated]`);
    expect(sent).toBeLessThan(8 * 1024 * 1024);
  });
});
