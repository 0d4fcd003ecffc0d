/**
 * Anyone the bot sends a file link to (LINE, here) opens many connections to
 * it and never reads the responses: the process holds one copy of the file
 * however many they are, none once they close, refuses a download (503) past
 * its bound on the bytes downloads hold, and cuts a response its client has
 * stopped reading after the stall timeout. An event stream after a download
 * on the same keep-alive connection is not cut.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { createLinePlugin } from '../../plugins/line/channel.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { downloadsInFlight, signedFileStore } from '../../src/plugin/files.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type FakeLine, LINE_ALICE, LINE_TEST, startFakeLine } from '../../testing/fakes/line-server.js';
import { waitFor } from '../../testing/wait.js';
import { heldEventStream } from '../helpers/held-stream.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const CID = `line:${LINE_ALICE}`;
/** More than the kernel's socket buffers take (4 MiB each way at most here): a client that never reads leaves most of it unsent. */
const SIZE = 16 * 1024 * 1024;
const FILE = { name: 'big.bin', mimeType: 'application/octet-stream', bytes: randomBytes(SIZE) };
const NOTHING = { downloads: 0, files: 0, bytes: 0 };

let line: FakeLine;
let redis: Redis;
let prefix: string;
let http: HttpServer | undefined;
let plugin: ChannelPlugin | undefined;
const sockets: Socket[] = [];
let release = () => {};

/**
 * Starts the LINE plugin (with `filesUrl`) on a host server, plus `extra` routes; sends FILE by LINE and answers the
 * host's address and the path and query of the file's signed URL.
 */
async function start(o: { stalledResponseTimeoutMs?: number; extra?: (routes: ReturnType<typeof routeRegistry>) => void } = {}) {
  http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger, ...o });
  o.extra?.(routeRegistry(http));
  const p = createLinePlugin(
    { ...LINE_TEST, apiBaseURL: line.apiUrl, filesUrl: 'https://bot.example.test', maxFileBytes: 20 * 1024 * 1024 },
    { logger, redis, prefix },
  );
  plugin = p;
  const { host } = ingestOnlyHost({ http, redis, prefix, logger, settings: () => ({}), outbound: () => p.outbound, access: () => ({ channels: {} }) });
  await p.start(host);
  const address = new URL(await listen(http, { host: '127.0.0.1', port: 0 }));
  const delivery = new RunDelivery({
    client: redis,
    prefix,
    conversationId: CID,
    runId: 'run1',
    resolve: () => p.outbound,
    logger,
    sleep: async () => undefined,
  });
  expect(await delivery.file(FILE, { key: 'big' })).toEqual({ outcome: 'sent' });
  const link = new URL(/https:\/\/\S+/.exec(line.sent[0]?.text ?? '')?.[0] ?? 'https://none');
  return { address, file: `${link.pathname}${link.search}` };
}

/**
 * A raw connection to `address` that sends `GET path` and reads nothing until `readRest()`; then `received()` answers
 * the bytes it got once the connection closed, undefined before.
 */
function neverReads(address: URL, path: string): { readRest: () => void; received: () => number | undefined } {
  const socket = connect(Number(address.port), address.hostname);
  sockets.push(socket);
  let closed = false;
  let bytes = 0;
  socket.on('close', () => (closed = true));
  socket.write(`GET ${path} HTTP/1.1\r\nhost: bot.example.test\r\n\r\n`);
  return { readRest: () => socket.on('data', (d: Buffer) => (bytes += d.length)), received: () => (closed ? bytes : undefined) };
}

beforeEach(async () => {
  line = await startFakeLine();
  redis = new Redis(redisUrl());
  prefix = testPrefix();
});
afterEach(async () => {
  release();
  for (const s of sockets.splice(0)) s.destroy();
  await plugin?.stop();
  await http?.close();
  plugin = undefined;
  http = undefined;
  await cleanupPrefix(redis, prefix);
  await redis.quit();
  await line.close();
});

describe('downloads of a file link whose clients never read', () => {
  it('hold one copy of the file however many they are, and nothing once their clients go away', async () => {
    const { address, file } = await start();
    for (let i = 0; i < 20; i++) neverReads(address, file);
    await waitFor(() => downloadsInFlight().downloads === 20, 10_000, 'the 20 downloads to be in progress');
    expect(downloadsInFlight()).toEqual({ downloads: 20, files: 1, bytes: SIZE });
    // A client that reads gets the whole file from the shared copy.
    const res = await fetch(new URL(file, address));
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(FILE.bytes)).toBe(true);

    for (const s of sockets.splice(0)) s.destroy();
    await waitFor(() => downloadsInFlight().downloads === 0, 10_000, 'the downloads to end');
    expect(downloadsInFlight()).toEqual(NOTHING);
  });

  it('past the bytes the process may hold for downloads, a download gets 503 with Retry-After and holds nothing', async () => {
    // Another store on the same process, bounded at a little more than the LINE file: the bound counts every store.
    const other = signedFileStore({ redis, prefix, path: '/other/files', ttlSeconds: 600, secret: 'other-secret-0123456789', maxBytesInFlight: SIZE + 1024 });
    const { address, file } = await start({ extra: (routes) => routes.add(other.route()) });
    const small = new URL((await other.keep(CID, { name: 'a.bin', mimeType: 'application/octet-stream', bytes: randomBytes(4096) }, 'a')).url, address);

    const stalled = neverReads(address, file);
    await waitFor(() => downloadsInFlight().downloads === 1, 10_000, 'the stalled download to be in progress');
    const refused = await fetch(small);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(downloadsInFlight()).toEqual({ downloads: 1, files: 1, bytes: SIZE });

    expect(stalled.received()).toBeUndefined();
    for (const s of sockets.splice(0)) s.destroy();
    await waitFor(() => downloadsInFlight().downloads === 0, 10_000, 'the stalled download to end');
    const served = await fetch(small);
    expect(served.status).toBe(200);
    expect((await served.arrayBuffer()).byteLength).toBe(4096);
    await waitFor(() => downloadsInFlight().downloads === 0, 10_000, 'the served download to end');
    expect(downloadsInFlight()).toEqual(NOTHING);
  });

  it('are cut after the stall timeout, what they held let go, while a keep-alive connection that downloaded the file goes on with an event stream', async () => {
    const events = heldEventStream();
    release = events.release;
    const { address, file } = await start({ stalledResponseTimeoutMs: 1000, extra: (routes) => routes.add(events.route) });
    // One connection reads the whole file, then asks for an event stream on it.
    const reader = connect(Number(address.port), address.hostname);
    sockets.push(reader);
    let got = Buffer.alloc(0);
    let readerClosed = false;
    reader.on('data', (d: Buffer) => (got = Buffer.concat([got, d])));
    reader.on('close', () => (readerClosed = true));
    reader.write(`GET ${file} HTTP/1.1\r\nhost: bot.example.test\r\n\r\n`);
    await waitFor(() => got.length > SIZE && got.includes('\r\n\r\n') && got.length - got.indexOf('\r\n\r\n') - 4 === SIZE, 20_000, 'the whole file');
    got = Buffer.alloc(0);
    reader.write('GET /events HTTP/1.1\r\nhost: bot.example.test\r\n\r\n');
    await waitFor(() => got.includes('data: first'), 10_000, 'the first event');

    const stalled = neverReads(address, file);
    await waitFor(() => downloadsInFlight().downloads === 1, 10_000, 'the stalled download to be in progress');
    await waitFor(() => downloadsInFlight().downloads === 0, 10_000, 'the server to cut the stalled download');
    expect(downloadsInFlight()).toEqual(NOTHING);
    // Cut, not sent: reading now, the client finds its connection closed part way through the file.
    stalled.readRest();
    expect(await waitFor(stalled.received, 10_000, 'the cut connection to close')).toBeLessThan(SIZE);

    // The event stream has been open longer than the stall timeout since the download on its connection ended.
    release();
    await waitFor(() => got.includes('data: last'), 10_000, 'the last event');
    expect(readerClosed).toBe(false);
  });
});
