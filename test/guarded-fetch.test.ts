/**
 * The guarded fetch every user- or model-supplied URL goes through: against
 * real local HTTP servers that redirect, each hop's scheme, allow-list and
 * resolved address are checked before anything is sent there; bodies and
 * time are bounded. Host names are pointed at the local servers with the
 * `resolve` option.
 */
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FetchRefusedError, InvalidInputError } from '../src/errors.js';
import { type GuardedFetchOptions, guardedFetch, type ResolveHost } from '../src/http/guarded-fetch.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A local server answering with `handler`; resolves its port and the paths it was asked for. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ port: number; hits: string[] }> {
  const hits: string[] = [];
  const s = createServer((req, res) => {
    hits.push(req.url ?? '');
    handler(req, res);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { port: (s.address() as AddressInfo).port, hits };
}

/** DNS answering from `table` (host → addresses); counts the look-ups. */
function fakeDns(table: Record<string, string[]>): ResolveHost & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (host: string) => {
    calls.push(host);
    const addresses = table[host];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
}

/** The refusal `p` rejects with. */
async function refusal(p: Promise<unknown>): Promise<FetchRefusedError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(FetchRefusedError);
  return err as FetchRefusedError;
}

// `files.test` stands for an allowed host on the internet: it resolves to the local server, allowed by name.
const filesHost = (extra: Partial<GuardedFetchOptions> = {}): GuardedFetchOptions => ({
  maxBytes: 1_000_000,
  allowPrivate: ['files.test'],
  resolve: fakeDns({ 'files.test': ['127.0.0.1'] }),
  ...extra,
});

describe('guardedFetch', () => {
  it('follows redirects between allowed hosts and reports where it ended', async () => {
    const { port } = await serve((q, s) => (q.url === '/a' ? s.writeHead(302, { location: '/b' }).end() : s.end(`at ${q.url}`)));
    const res = await guardedFetch(`http://files.test:${port}/a`, filesHost());
    expect(res).toMatchObject({ status: 200, url: `http://files.test:${port}/b`, redirects: 1, truncated: false });
    expect(res.data.toString()).toBe('at /b');
  });

  it('POSTs a body; a 307 sends the same POST on, a 303 is followed with a GET and no body', async () => {
    const seen: string[] = [];
    const { port } = await serve((q, s) => {
      let body = '';
      q.on('data', (c: Buffer) => {
        body += c.toString();
      });
      q.on('end', () => {
        seen.push(`${q.method} ${q.url} ${body}`);
        if (q.url === '/keep') return s.writeHead(307, { location: '/kept' }).end();
        if (q.url === '/see') return s.writeHead(303, { location: '/seen' }).end();
        s.end('ok');
      });
    });
    const post = (path: string) => guardedFetch(`http://files.test:${port}${path}`, filesHost({ method: 'POST', body: '{"q":1}' }));
    expect((await post('/keep')).url).toBe(`http://files.test:${port}/kept`);
    expect((await post('/see')).url).toBe(`http://files.test:${port}/seen`);
    expect(seen).toEqual(['POST /keep {"q":1}', 'POST /kept {"q":1}', 'POST /see {"q":1}', 'GET /seen ']);
  });

  it('keeps an API key on the same origin, and does not let it follow a redirect to another host or port', async () => {
    const seen: Array<{ url: string; key?: string; auth?: string; type?: string; agent?: string }> = [];
    const record = (q: IncomingMessage) =>
      seen.push({
        url: `${q.headers.host}${q.url}`,
        ...(q.headers['x-subscription-token'] && { key: String(q.headers['x-subscription-token']) }),
        ...(q.headers.authorization && { auth: q.headers.authorization }),
        ...(q.headers['content-type'] && { type: q.headers['content-type'] }),
        ...(q.headers['user-agent'] && { agent: q.headers['user-agent'] }),
      });
    const other = await serve((q, s) => {
      record(q);
      s.end('elsewhere');
    });
    const { port } = await serve((q, s) => {
      q.resume();
      q.on('end', () => {
        record(q);
        if (q.url === '/same') return s.writeHead(307, { location: '/kept' }).end();
        if (q.url === '/away') return s.writeHead(302, { location: `http://files.test:${other.port}/there` }).end();
        s.end('ok');
      });
    });
    const headers = {
      'user-agent': 'steerbot',
      authorization: 'Bearer tvly-secret',
      'x-subscription-token': 'brave-secret',
      'content-type': 'application/json',
    };
    const post = (path: string) => guardedFetch(`http://files.test:${port}${path}`, filesHost({ method: 'POST', body: '{"q":1}', headers }));
    await post('/same');
    await post('/away');
    const secrets = { key: 'brave-secret', auth: 'Bearer tvly-secret', type: 'application/json', agent: 'steerbot' };
    expect(seen).toEqual([
      { url: `files.test:${port}/same`, ...secrets },
      { url: `files.test:${port}/kept`, ...secrets },
      { url: `files.test:${port}/away`, ...secrets },
      { url: `files.test:${other.port}/there`, agent: 'steerbot' },
    ]);
  });

  describe('a redirect from an allowed host', () => {
    it('to 127.0.0.1 is refused at the address check, and nothing is sent there', async () => {
      const internal = await serve((_q, s) => s.end('secret'));
      const { port } = await serve((_q, s) => s.writeHead(302, { location: `http://127.0.0.1:${internal.port}/latest/meta-data/` }).end());
      const err = await refusal(guardedFetch(`http://files.test:${port}/report.pdf`, filesHost()));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(err.code).toBe('FETCH_REFUSED');
      expect(err.reason).toBe('address');
      expect(err.message).toContain('127.0.0.1 is not a public address');
      expect(internal.hits).toEqual([]);
    });

    it.each([
      ['IPv4-compatible, dotted', '[::127.0.0.1]', '::7f00:1'],
      ['IPv4-compatible, hex', '[::7f00:1]', '::7f00:1'],
      ['IPv4-mapped', '[::ffff:127.0.0.1]', '::ffff:7f00:1'],
      ['6to4', '[2002:7f00:1::]', '2002:7f00:1::'],
      ['NAT64 well-known prefix', '[64:ff9b::7f00:1]', '64:ff9b::7f00:1'],
      ['NAT64 local-use prefix', '[64:ff9b:1::a00:1]', '64:ff9b:1::a00:1'],
    ])('to the %s form %s is refused at the address check', async (_form, literal, normalized) => {
      const { port, hits } = await serve((q, s) =>
        q.url === '/go' ? s.writeHead(302, { location: `http://${literal}:${port}/internal` }).end() : s.end('internal'),
      );
      const err = await refusal(guardedFetch(`http://files.test:${port}/go`, filesHost()));
      expect(err.reason).toBe('address');
      expect(err.message).toContain(`${normalized} is not a public address`);
      expect(hits).toEqual(['/go']);
    });

    it.each([['127.0.0.1'], ['::7f00:1'], ['2002:7f00:1::'], ['64:ff9b::7f00:1'], ['64:ff9b:1::a00:1'], ['93.184.216.34', '10.0.0.1']])(
      'to a name resolving to %s is refused after DNS, before connecting',
      async (...addresses) => {
        const { port, hits } = await serve((q, s) =>
          q.url === '/go' ? s.writeHead(302, { location: `http://rebind.test:${port}/internal` }).end() : s.end('internal'),
        );
        const resolve = fakeDns({ 'files.test': ['127.0.0.1'], 'rebind.test': addresses });
        const err = await refusal(guardedFetch(`http://files.test:${port}/go`, filesHost({ resolve })));
        expect(err.reason).toBe('address');
        expect(err.message).toContain('rebind.test resolves to a non-public address');
        expect(hits).toEqual(['/go']);
      },
    );

    it('to a host off the allow-list is refused, even one whose address is allowed', async () => {
      const { port, hits } = await serve((q, s) => (q.url === '/go' ? s.writeHead(302, { location: `http://other.test:${port}/x` }).end() : s.end('other')));
      const resolve = fakeDns({ 'files.test': ['127.0.0.1'], 'other.test': ['127.0.0.1'] });
      const allowUrl = (url: URL) => url.hostname === 'files.test';
      const err = await refusal(guardedFetch(`http://files.test:${port}/go`, filesHost({ resolve, allowUrl, allowPrivate: ['files.test', 'other.test'] })));
      expect(err.reason).toBe('host');
      expect(err.message).toContain(`other.test:${port} is not an allowed host`);
      expect(hits).toEqual(['/go']);
      expect(resolve.calls).toEqual(['files.test']);
    });

    it.each(['file:///etc/passwd', 'gopher://files.test/', 'http://user:pw@files.test/'])('to %s is refused', async (location) => {
      const { port } = await serve((_q, s) => s.writeHead(301, { location }).end());
      expect((await refusal(guardedFetch(`http://files.test:${port}/`, filesHost()))).reason).toBe('url');
    });
  });

  it('refuses a first URL on a non-public address without connecting, unless that address is allowed', async () => {
    const { port, hits } = await serve((_q, s) => s.end('ok'));
    const resolve = fakeDns({ localhost: ['127.0.0.1'] });
    expect((await refusal(guardedFetch(`http://127.0.0.1:${port}/`, { maxBytes: 100, resolve }))).reason).toBe('address');
    expect((await refusal(guardedFetch(`http://localhost:${port}/`, { maxBytes: 100, resolve }))).reason).toBe('address');
    expect(hits).toEqual([]);
    const res = await guardedFetch(`http://127.0.0.1:${port}/`, { maxBytes: 100, allowPrivate: ['127.0.0.0/8'] });
    expect(res.data.toString()).toBe('ok');
  });

  it('connects to the address it checked: a name is looked up once per hop', async () => {
    const { port } = await serve((_q, s) => s.end('ok'));
    let answers = 0;
    // A rebinding DNS: the first answer is allowed, every later one points elsewhere.
    const resolve: ResolveHost = async () => [{ address: answers++ === 0 ? '127.0.0.1' : '127.0.0.2', family: 4 }];
    const res = await guardedFetch(`http://rebind.test:${port}/`, { maxBytes: 100, allowPrivate: ['127.0.0.1'], resolve });
    expect(res.data.toString()).toBe('ok');
    expect(answers).toBe(1);
  });

  it('stops after maxRedirects', async () => {
    const { port, hits } = await serve((_q, s) => s.writeHead(307, { location: '/again' }).end());
    expect((await refusal(guardedFetch(`http://files.test:${port}/`, filesHost({ maxRedirects: 3 })))).reason).toBe('redirects');
    expect(hits).toHaveLength(4);
  });

  it('refuses a body over maxBytes: by its declared length, or while it streams without one', async () => {
    let sent = 0;
    const total = 8 * 1024 * 1024;
    const { port } = await serve((q, s) => {
      if (q.url === '/declared') return s.writeHead(200, { 'content-length': 5000 }).end(Buffer.alloc(5000));
      const chunk = Buffer.alloc(64 * 1024);
      // Up to 8 MiB without a length, stopped when the client goes away.
      const push = () => {
        while (sent < total) {
          sent += chunk.length;
          if (!s.write(chunk)) return void s.once('drain', push);
        }
        s.end();
      };
      push();
    });
    const declared = await refusal(guardedFetch(`http://files.test:${port}/declared`, filesHost({ maxBytes: 4000, label: 'attachment' })));
    expect(declared.reason).toBe('too_large');
    expect(declared.message).toBe('attachment is 5000 bytes or more, more than 4000');
    expect((await refusal(guardedFetch(`http://files.test:${port}/stream`, filesHost({ maxBytes: 100_000 })))).reason).toBe('too_large');
    expect(sent).toBeLessThan(total);
  });

  it('keeps the first maxBytes of a longer body when told to truncate', async () => {
    const { port } = await serve((_q, s) => s.end('x'.repeat(10_000)));
    const res = await guardedFetch(`http://files.test:${port}/`, filesHost({ maxBytes: 1000, oversize: 'truncate' }));
    expect(res.truncated).toBe(true);
    expect(res.data.toString()).toBe('x'.repeat(1000));
  });

  it('refuses to wait past timeoutMs for a server that does not answer', async () => {
    const { port, hits } = await serve(() => undefined);
    const err = await refusal(guardedFetch(`http://files.test:${port}/slow`, filesHost({ timeoutMs: 200 })));
    expect(err.reason).toBe('timeout');
    expect(hits).toEqual(['/slow']);
  });

  it("throws the caller's abort as is", async () => {
    const { port } = await serve(() => undefined);
    const controller = new AbortController();
    const fetching = guardedFetch(`http://files.test:${port}/`, filesHost({ signal: controller.signal }));
    controller.abort();
    const err = await fetching.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(FetchRefusedError);
    expect((err as Error).name).toBe('AbortError');
  });

  it("leaves nothing on the caller's signal once a fetch is over (a run's signal outlives its fetches)", async () => {
    const { port } = await serve((_q, s) => s.end('ok'));
    const run = new AbortController();
    for (let i = 0; i < 5; i++) await guardedFetch(`http://files.test:${port}/`, filesHost({ signal: run.signal }));
    expect(getEventListeners(run.signal, 'abort')).toHaveLength(0);
    const key = Object.getOwnPropertySymbols(run.signal).find((k) => k.description === 'kDependantSignals');
    // What `AbortSignal.any` registers on its sources, one per call, kept until the source is collected.
    expect(key ? ((run.signal as unknown as Record<symbol, Set<unknown> | undefined>)[key]?.size ?? 0) : 0).toBe(0);
  });
});
