/**
 * Files out on the webhook channel: with `filesUrl` set, a file a run sends
 * is kept for download and its reply (callback and event stream) carries a
 * signed, expiring URL under the channel's path, served by the host; without
 * it the channel takes no files and the person gets the text instead.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createWebhookPlugin, type WebhookChannelConfigInput } from '../../plugins/webhook/index.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { signedHeaders } from '../../src/http/signature.js';
import { createLogger } from '../../src/logger.js';
import { signedFileStore } from '../../src/plugin/files.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { PDF } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-test-0123456789abcdef';
const CID = 'webhook:crm:ticket-7';
const logger = createLogger({ level: 'silent' });

let callbacks: CallbackServer;
let h: { url: string; plugin: ChannelPlugin; prefix: string; redis: Redis; http: HttpServer };

async function start(config: Partial<WebhookChannelConfigInput>): Promise<void> {
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = createWebhookPlugin('crm', { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 5, ...config }, { logger, redis, prefix });
  const { host } = ingestOnlyHost({ http, redis, prefix, logger, settings: () => ({}), outbound: () => plugin.outbound, access: () => ({ channels: {} }) });
  await plugin.start(host);
  const url = await listen(http, { host: '127.0.0.1', port: 0 });
  h = { url, plugin, prefix, redis, http };
}

beforeEach(async () => {
  callbacks = await startCallbackServer(SECRET);
});
afterEach(async () => {
  await h.plugin.stop();
  await h.http.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
  await callbacks.close();
});

const delivery = (runId: string) =>
  new RunDelivery({ client: h.redis, prefix: h.prefix, conversationId: CID, runId, resolve: () => h.plugin.outbound, logger, sleep: async () => undefined });
const report = { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' };

describe('webhook files out', () => {
  it('calls back with a signed download URL the host serves the bytes at, once per delivery key', async () => {
    await start({ filesUrl: 'https://bot.example.com' });
    expect(await delivery('run1').file(report, { key: 'k_1' })).toEqual({ outcome: 'sent' });
    await delivery('run1').file(report, { key: 'k_1' });

    const [cb] = await callbacks.waitForAccepted(1, 10_000);
    expect(cb!.signed).toBe(true);
    expect(cb!.body).toMatchObject({
      conversation: 'ticket-7',
      text: 'Q3 report',
      file: { name: 'report.pdf', mimeType: 'application/pdf', size: PDF.byteLength },
    });
    const url = new URL(cb!.body.file!.url);
    expect(url.origin).toBe('https://bot.example.com');
    expect(url.pathname).toMatch(/^\/webhooks\/crm\/files\/webhook%3Acrm%3Aticket-7\/[0-9a-f]{32}$/);

    const res = await fetch(`${h.url}${url.pathname}${url.search}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''report.pdf");
    expect(Buffer.from(await res.arrayBuffer()).equals(PDF)).toBe(true);
    expect(callbacks.accepted()).toHaveLength(1);
  });

  it('sends a spoken reply as an audio file marked voice; other files carry no mark', async () => {
    await start({ filesUrl: 'https://bot.example.com' });
    const ogg = Buffer.from('OggS\0fake opus');
    await delivery('run5').file({ name: 'reply.ogg', mimeType: 'audio/ogg', bytes: ogg, voice: true }, { key: 'voice' });
    await delivery('run5').file(report, { key: 'pdf' });
    const [spoken, other] = await callbacks.waitForAccepted(2, 10_000);
    expect(spoken!.body).toMatchObject({ text: '', file: { name: 'reply.ogg', mimeType: 'audio/ogg', size: ogg.byteLength, voice: true } });
    expect(other!.body.file).not.toHaveProperty('voice');
    const url = new URL(spoken!.body.file!.url);
    const res = await fetch(`${h.url}${url.pathname}${url.search}`);
    expect(res.headers.get('content-type')).toBe('audio/ogg');
    expect(Buffer.from(await res.arrayBuffer()).equals(ogg)).toBe(true);
  });

  it('refuses a download URL with an altered signature or expiry', async () => {
    await start({ filesUrl: 'https://bot.example.com' });
    await delivery('run2').file(report, { key: 'k_2' });
    const [cb] = await callbacks.waitForAccepted(1, 10_000);
    const url = new URL(cb!.body.file!.url);
    const expires = Number(url.searchParams.get('expires'));

    const altered = new URL(url);
    altered.searchParams.set('expires', String(expires + 3600));
    expect((await fetch(`${h.url}${altered.pathname}${altered.search}`)).status).toBe(403);
    expect((await fetch(`${h.url}${url.pathname}?expires=${expires}`)).status).toBe(403);
    const past = new URL(url);
    past.searchParams.set('expires', '1000');
    expect((await fetch(`${h.url}${past.pathname}${past.search}`)).status).toBe(403);

    // The genuine URL, once its time is up.
    const later = signedFileStore({
      redis: h.redis,
      prefix: h.prefix,
      path: '/webhooks/crm/files',
      ttlSeconds: 3600,
      secret: SECRET,
      now: () => (expires + 1) * 1000,
    }).route();
    const id = url.pathname.split('/').at(-1)!;
    const query = Object.fromEntries(url.searchParams);
    const answer = await later.handle({
      method: 'GET',
      path: url.pathname,
      params: { conversation: CID, id },
      query,
      headers: {},
      body: Buffer.alloc(0),
      signal: new AbortController().signal,
    });
    expect(answer.status).toBe(404);
  });

  it('a download URL stops working after /purge of its conversation', async () => {
    await start({ filesUrl: 'https://bot.example.com' });
    await delivery('run4').file(report, { key: 'k_4' });
    const [cb] = await callbacks.waitForAccepted(1, 10_000);
    const url = new URL(cb!.body.file!.url);
    expect((await fetch(`${h.url}${url.pathname}${url.search}`)).status).toBe(200);

    const body = JSON.stringify({ id: 'purge-1', conversation: 'ticket-7', sender: { id: 'u-7' }, text: '/purge' });
    const purge = await fetch(`${h.url}/webhooks/crm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, body) },
      body,
    });
    expect(await purge.json()).toMatchObject({ result: 'command', command: 'purge' });

    expect((await fetch(`${h.url}${url.pathname}${url.search}`)).status).toBe(404);
    expect(await h.redis.keys(`${h.prefix}:{c:${CID}}:file*`)).toEqual([]);
  });

  it('takes no files without filesUrl: the callback carries the text saying so', async () => {
    await start({});
    expect(h.plugin.outbound.sendFile).toBeUndefined();
    expect(await delivery('run3').file(report, { key: 'k_3' })).toEqual({ outcome: 'unsupported' });
    const [cb] = await callbacks.waitForAccepted(1, 10_000);
    expect(cb!.body.text).toBe('[file report.pdf could not be sent here: this channel does not take files]\nQ3 report');
    expect(cb!.body.file).toBeUndefined();
  });
});
