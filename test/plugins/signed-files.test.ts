/**
 * The plugin kit's signed file store (`signedFileStore`): a kept file is
 * served only at the URL it was given, until it expires or its conversation
 * is purged; the bytes go from Redis with it.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RouteRequest, RouteResponse } from '../../src/http/routes.js';
import { downloadsInFlight, signedFileStore } from '../../src/plugin/files.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const CID = 'web:browser-0001';
const PNG = { name: 'chart.png', mimeType: 'image/png', bytes: Buffer.from('\x89PNG\r\n\x1a\nfake') };

let redis: Redis;
let prefix: string;
beforeEach(() => {
  redis = new Redis(redisUrl());
  prefix = testPrefix();
});
afterEach(async () => {
  // Every test lets go of the responses it got: nothing is left held.
  expect(downloadsInFlight()).toEqual({ downloads: 0, files: 0, bytes: 0 });
  await cleanupPrefix(redis, prefix);
  await redis.quit();
});

/** The request a GET of `url` (relative) makes to the store's route. */
function requestOf(url: string, headers: RouteRequest['headers'] = {}): RouteRequest {
  const u = new URL(url, 'http://host.test');
  const [conversation, id] = u.pathname.split('/').slice(-2).map(decodeURIComponent);
  return {
    method: 'GET',
    path: u.pathname,
    params: { conversation: conversation!, id: id! },
    query: Object.fromEntries(u.searchParams),
    headers,
    body: Buffer.alloc(0),
    signal: new AbortController().signal,
  };
}

/** What the host does once it has sent a response (or its client went away): lets go of what the response holds. */
const letGo = (res: RouteResponse) => {
  if ('onClose' in res) res.onClose?.();
};

/** A store whose route lets go of each response as soon as it answers, as the host does once it has sent one. */
const store = (over: Partial<Parameters<typeof signedFileStore>[0]> = {}) => {
  const s = signedFileStore({ redis, prefix, path: '/files', ttlSeconds: 600, ...over });
  const route = s.route();
  const handle: typeof route.handle = async (req) => {
    const res = await route.handle(req);
    letGo(res);
    return res;
  };
  return { keep: s.keep, route: () => ({ ...route, handle }), raw: s };
};

describe('signed file store', () => {
  it('serves a kept file at its URL, not as a page of the origin', async () => {
    const s = store();
    const { url, size } = await s.keep(CID, PNG, 'run1:k_1:0');
    expect(size).toBe(PNG.bytes.byteLength);
    expect(url).toMatch(/^\/files\/web%3Abrowser-0001\/[0-9a-f]{32}\?expires=\d+&sig=[0-9a-f]{64}$/);
    const res = await s.route().handle(requestOf(url));
    expect(res).toMatchObject({ status: 200, headers: { 'content-type': 'image/png', 'x-content-type-options': 'nosniff' } });
    expect((res as { body: Buffer }).body.equals(PNG.bytes)).toBe(true);
    expect((res as { headers: Record<string, string> }).headers['content-security-policy']).toContain('sandbox');
    // The same delivery key keeps the same file.
    expect(new URL((await s.keep(CID, PNG, 'run1:k_1:0')).url, 'http://h').pathname).toBe(new URL(url, 'http://h').pathname);
  });

  it("with extensionInUrl ends the URL's path with the file's extension, served with the kept type whatever extension is asked", async () => {
    const s = store({ extensionInUrl: true });
    const { url } = await s.keep(CID, { name: 'reply.MP3', mimeType: 'audio/mpeg', bytes: Buffer.from('ID3 fake') }, 'run1:voice:0');
    expect(url).toMatch(/^\/files\/web%3Abrowser-0001\/[0-9a-f]{32}\.mp3\?expires=\d+&sig=[0-9a-f]{64}$/);
    expect(await s.route().handle(requestOf(url))).toMatchObject({ status: 200, headers: { 'content-type': 'audio/mpeg' } });
    expect((await s.route().handle(requestOf(url.replace('.mp3?', '.html?')))).headers).toMatchObject({ 'content-type': 'audio/mpeg' });
    // More than an extension after the id: refused like any other id.
    expect((await s.route().handle(requestOf(url.replace('.mp3?', '.mp3.exe.tar.gz?')))).status).toBe(403);
    // A name without one gives a bare id.
    expect((await s.keep(CID, { ...PNG, name: 'notes' }, 'run1:k_9:0')).url).toMatch(/\/[0-9a-f]{32}\?expires=/);
  });

  it('refuses a guessed or altered download URL (403) and serves nothing', async () => {
    const s = store();
    const { url } = await s.keep(CID, PNG, 'run1:k_2:0');
    const u = new URL(url, 'http://host.test');
    const route = s.route();
    const guessed = `/files/${encodeURIComponent(CID)}/${'a'.repeat(32)}?expires=${u.searchParams.get('expires')}&sig=${'0'.repeat(64)}`;
    expect((await route.handle(requestOf(guessed))).status).toBe(403);
    const otherConversation = url.replace('browser-0001', 'browser-0002');
    expect((await route.handle(requestOf(otherConversation))).status).toBe(403);
    const later = url.replace(/expires=(\d+)/, (_, e) => `expires=${Number(e) + 3600}`);
    expect((await route.handle(requestOf(later))).status).toBe(403);
    expect((await route.handle(requestOf(url.replace(/&sig=.*/, '')))).status).toBe(403);
    // Signed with another store's key: refused too.
    expect((await store({ secret: 'another-secret-0123456789' }).route().handle(requestOf(url))).status).toBe(403);
  });

  it('refuses an expired download URL (404), and the bytes expire from Redis with it', async () => {
    const s = store({ ttlSeconds: 600 });
    const { url, expiresAt } = await s.keep(CID, PNG, 'run1:k_3:0');
    const later = store({ ttlSeconds: 600, now: () => expiresAt.getTime() + 1000 });
    expect((await later.route().handle(requestOf(url))).status).toBe(404);
    const [fileKey] = await redis.keys(`${prefix}:{c:${CID}}:file:*`);
    const ttl = await redis.pttl(fileKey!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(600_000);
  });

  it('a file outlives no /purge: its URL answers 404 and no key of it is left', async () => {
    const s = store();
    const { url } = await s.keep(CID, PNG, 'run1:k_4:0');
    await s.keep(CID, { ...PNG, name: 'b.png' }, 'run1:k_5:0');
    expect((await purgeConversation(redis, prefix, CID)).kind).toBe('purged');
    expect((await s.route().handle(requestOf(url))).status).toBe(404);
    expect(await redis.keys(`${prefix}:{c:${CID}}:file*`)).toEqual([]);
  });

  it('signs with a key kept in Redis when given none, so every process on it agrees', async () => {
    const { url } = await store().keep(CID, PNG, 'run1:k_6:0');
    expect((await store().route().handle(requestOf(url))).status).toBe(200);
  });

  it('concurrent downloads of a file share one copy, counted once, and let it go when the last is done with', async () => {
    const s = store().raw;
    const { url } = await s.keep(CID, PNG, 'run1:k_8:0');
    const route = s.route();
    const [a, b] = await Promise.all([route.handle(requestOf(url)), route.handle(requestOf(url))]);
    const body = (r: typeof a) => (r as { body: Buffer }).body;
    expect(body(a)).toBe(body(b));
    expect(downloadsInFlight()).toEqual({ downloads: 2, files: 1, bytes: PNG.bytes.byteLength });
    letGo(a);
    letGo(a);
    expect(downloadsInFlight()).toEqual({ downloads: 1, files: 1, bytes: PNG.bytes.byteLength });
    letGo(b);
    expect(downloadsInFlight()).toEqual({ downloads: 0, files: 0, bytes: 0 });
  });

  it('refuses a download past maxBytesInFlight with 503 and Retry-After, holding nothing, and serves it once the others are done', async () => {
    const s = store({ maxBytesInFlight: PNG.bytes.byteLength + 1 }).raw;
    const first = await s.keep(CID, PNG, 'run1:k_10:0');
    const second = await s.keep(CID, { ...PNG, name: 'b.png' }, 'run1:k_11:0');
    const route = s.route();
    const held = await route.handle(requestOf(first.url));
    const refused = await route.handle(requestOf(second.url));
    expect(refused).toMatchObject({ status: 503, headers: { 'retry-after': expect.stringMatching(/^\d+$/) } });
    // The file already held is shared, not counted again.
    const shared = await route.handle(requestOf(first.url));
    expect(shared.status).toBe(200);
    expect(downloadsInFlight()).toEqual({ downloads: 2, files: 1, bytes: PNG.bytes.byteLength });
    letGo(held);
    letGo(shared);
    const served = await route.handle(requestOf(second.url));
    expect(served.status).toBe(200);
    letGo(served);
  });

  it("asks the guard first: a request it refuses gets the guard's answer", async () => {
    const s = store({ guard: (req) => (req.headers.cookie === 'ok' ? undefined : { status: 401, json: { error: 'log in' } }) });
    const { url } = await s.keep(CID, PNG, 'run1:k_7:0');
    expect((await s.route().handle(requestOf(url))).status).toBe(401);
    expect((await s.route().handle(requestOf(url, { cookie: 'ok' }))).status).toBe(200);
  });
});
