/**
 * Where attachment bytes come from besides Telegram: Discord fetches only
 * from its own file hosts; a webhook fetches only from hosts in its
 * `attachmentHosts` allow-list, at every redirect, and only public addresses
 * unless `attachmentAllowPrivate` lists them; both stop reading past the size
 * limit. Against a real local HTTP server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { discordConfigSchema } from '../../plugins/discord/config.js';
import { createDiscordOutbound, createRest } from '../../plugins/discord/outbound.js';
import { webhookChannelConfigSchema } from '../../plugins/webhook/config.js';
import { allowedAttachmentUrl, createWebhookOutbound } from '../../plugins/webhook/outbound.js';
import { FetchRefusedError, InvalidInputError } from '../../src/errors.js';
import { createRedis } from '../../src/redis/connection.js';
import { defaultRedisUrl } from '../../testing/redis.js';

let server: Server;
let origin: string;
const hits: string[] = [];
const FILE = Buffer.from('%PDF-1.7 fake report '.repeat(100));

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/report.pdf') {
      res.writeHead(200, { 'content-type': 'application/pdf', 'content-length': FILE.byteLength });
      res.end(FILE);
    } else if (req.url?.startsWith('/redirect?to=')) {
      res.writeHead(302, { location: decodeURIComponent(req.url.slice('/redirect?to='.length)) }).end();
    } else if (req.url === '/chunked.bin') {
      // No length announced: the reader must stop by itself.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(50_000));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('webhook attachments', () => {
  it('are fetched from allowed hosts only', async () => {
    const redis = createRedis({ url: defaultRedisUrl() });
    try {
      const host = new URL(origin).host;
      const config = webhookChannelConfigSchema.parse({ secret: 'a-secret-of-16-chars', attachmentHosts: [host], attachmentAllowPrivate: ['127.0.0.1'] });
      const out = createWebhookOutbound({ channelId: 'webhook:crm', config, redis, prefix: 'unused' });
      const got = await out.fetchAttachment!({ kind: 'file', ref: `${origin}/report.pdf` }, { maxBytes: 1_000_000 });
      expect(Buffer.from(got.data)).toEqual(FILE);
      expect(got.mediaType).toBe('application/pdf');

      const closed = createWebhookOutbound({
        channelId: 'webhook:crm',
        config: webhookChannelConfigSchema.parse({ secret: 'a-secret-of-16-chars' }),
        redis,
        prefix: 'unused',
      });
      const before = hits.length;
      await expect(closed.fetchAttachment!({ kind: 'file', ref: `${origin}/report.pdf` }, { maxBytes: 1_000_000 })).rejects.toBeInstanceOf(InvalidInputError);
      expect(hits.length).toBe(before); // refused without a request

      await expect(out.fetchAttachment!({ kind: 'file', ref: `${origin}/chunked.bin` }, { maxBytes: 10_000 })).rejects.toThrow(/more than 10000/);
    } finally {
      redis.disconnect();
    }
  });

  it('refuses a redirect from an allowed host to an internal address, or to a host off the list, before requesting it', async () => {
    const redis = createRedis({ url: defaultRedisUrl() });
    try {
      const { port } = new URL(origin);
      // files.test stands for an allowed host on the internet; 127.0.0.1 is listed as a host, but its address is not public.
      const config = webhookChannelConfigSchema.parse({
        secret: 'a-secret-of-16-chars',
        attachmentHosts: [`files.test:${port}`, `127.0.0.1:${port}`],
        attachmentAllowPrivate: ['files.test'],
      });
      const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
      const out = createWebhookOutbound({ channelId: 'webhook:crm', config, redis, prefix: 'unused', resolve });
      const via = (to: string) => ({ kind: 'file' as const, ref: `http://files.test:${port}/redirect?to=${encodeURIComponent(to)}` });
      expect(Buffer.from((await out.fetchAttachment!(via('/report.pdf'), { maxBytes: 1_000_000 })).data)).toEqual(FILE);

      const before = hits.length;
      const internal = await out.fetchAttachment!(via(`${origin}/report.pdf`), { maxBytes: 1_000_000 }).catch((e: unknown) => e);
      expect(internal).toBeInstanceOf(FetchRefusedError);
      expect((internal as FetchRefusedError).reason).toBe('address');
      const elsewhere = await out.fetchAttachment!(via(`http://evil.test:${port}/report.pdf`), { maxBytes: 1_000_000 }).catch((e: unknown) => e);
      expect((elsewhere as FetchRefusedError).reason).toBe('host');
      // Only the two redirecting URLs were requested, never their targets.
      expect(hits.slice(before).map((h) => h.split('?')[0])).toEqual(['/redirect', '/redirect']);
    } finally {
      redis.disconnect();
    }
  });

  it('allow-list: exact hosts with their port, wildcard subdomains, http(s) only, no credentials in the URL; private allowances are hosts, addresses or ranges', () => {
    const hosts = ['files.example.com', '*.cdn.example.org', '127.0.0.1:9000'];
    expect(allowedAttachmentUrl('https://files.example.com/a.png', hosts)).toBe(true);
    expect(allowedAttachmentUrl('https://x.cdn.example.org/a.png', hosts)).toBe(true);
    expect(allowedAttachmentUrl('http://127.0.0.1:9000/a.png', hosts)).toBe(true);
    expect(allowedAttachmentUrl('https://cdn.example.org/a.png', hosts)).toBe(false);
    expect(allowedAttachmentUrl('https://evilfiles.example.com/a.png', hosts)).toBe(false);
    expect(allowedAttachmentUrl('http://127.0.0.1:6379/', hosts)).toBe(false);
    expect(allowedAttachmentUrl('https://user:pw@files.example.com/a.png', hosts)).toBe(false);
    expect(allowedAttachmentUrl('file:///etc/passwd', ['files.example.com'])).toBe(false);
    const privateAllow = (list: string[]) => webhookChannelConfigSchema.safeParse({ secret: 'a-secret-of-16-chars', attachmentAllowPrivate: list });
    expect(privateAllow(['files.internal', '10.1.0.0/16', 'fd00::/8']).success).toBe(true);
    expect(privateAllow(['10.1.0.0/40']).error?.issues[0]?.message).toMatch(/host name, an IP address or a CIDR range/);
  });
});

describe('Discord attachments', () => {
  it('are fetched from Discord file hosts (or the configured API origin) only', async () => {
    const config = discordConfigSchema.parse({ token: 'discord-token', apiBase: `${origin}/api` });
    const out = createDiscordOutbound('discord', config, createRest(config));
    const got = await out.fetchAttachment!({ kind: 'file', ref: `${origin}/report.pdf`, name: 'report.pdf' }, { maxBytes: 1_000_000 });
    expect(Buffer.from(got.data)).toEqual(FILE);

    const elsewhere = createDiscordOutbound('discord', discordConfigSchema.parse({ token: 'discord-token' }), createRest(config));
    await expect(elsewhere.fetchAttachment!({ kind: 'file', ref: `${origin}/report.pdf` }, { maxBytes: 1_000_000 })).rejects.toThrow(
      /not on a Discord file host/,
    );
    await expect(out.fetchAttachment!({ kind: 'file', ref: `${origin}/report.pdf`, size: 5_000_000 }, { maxBytes: 1_000_000 })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });
});
