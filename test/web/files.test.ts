/**
 * Files in the web chat, in a real browser: a file a run sends (through the
 * runner's delivery and the web chat's outbound side, as a runner process
 * does) shows inline in the page: an image as an <img> loaded from the
 * host's signed route, a spoken reply as an <audio> player, another file as
 * a download link; names and captions are text, never HTML. At the HTTP
 * level the route serves the bytes only at the signed URL.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebPlugin } from '../../plugins/web/index.js';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import { createLogger } from '../../src/logger.js';
import { PDF } from '../helpers/media.js';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from './harness.js';

const logger = createLogger({ level: 'silent' });
/** A 1×1 PNG: it loads (naturalWidth 1) only when the route serves the bytes. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const OGG = Buffer.from('OggS spoken reply');
const EVIL_NAME = '<img src=x onerror="window.__pwned=1">.png';

describe('files in the web chat', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let page: Page | undefined;
  let conversationId: string;

  beforeAll(async () => {
    world = await startWorld(redisUrl());
    browser = await launchBrowser();
    page = await (await browser.newContext()).newPage();
    await page.goto(`${world.app.address}/`);
    await page.waitForSelector('body[data-connected="true"]');
    conversationId = publicConversationId((await page.locator('body').getAttribute('data-conversation'))!);
  });
  afterAll(async () => {
    await page?.context().close();
    await browser?.close();
    await world?.stop();
  });

  /** A run's delivery through a web chat outbound of its own, as a runner process has. */
  const delivery = (runId: string) => {
    const outbound = createWebPlugin({}, { logger, redis: world.app.ctx.redis, prefix: world.prefix }).outbound;
    return new RunDelivery({ client: world.app.ctx.redis, prefix: world.prefix, conversationId, runId, resolve: () => outbound, logger });
  };

  it('shows an image inline from the signed route, its HTML-looking name and caption as text', async () => {
    const p = page!;
    expect(await delivery('runimg').file({ name: EVIL_NAME, mimeType: 'image/png', bytes: PNG, caption: '<b>chart</b>' }, { key: 'k_img' })).toEqual({
      outcome: 'sent',
    });
    const bubble = p.locator('.msg.bot', { has: p.locator('.file.image') });
    const img = bubble.locator('.file.image img');
    await img.waitFor();
    await poll(() => img.evaluate((e: any) => e.complete && e.naturalWidth)).toBe(1);
    expect(await img.getAttribute('alt')).toBe(EVIL_NAME);
    expect(await bubble.locator('.body').textContent()).toBe('<b>chart</b>');
    expect(await bubble.locator('b').count()).toBe(0);
    expect(await bubble.locator('.file a.download').textContent()).toBe(EVIL_NAME);
    // Only the one <img> the page made: the name's markup never became an element.
    expect(await bubble.locator('img').count()).toBe(1);
    expect(await p.evaluate(() => (globalThis as any).__pwned)).toBeUndefined();
  });

  it('plays a spoken reply in an <audio> player served by the signed route', async () => {
    const p = page!;
    await delivery('runvoice').file({ name: 'reply.ogg', mimeType: 'audio/ogg', bytes: OGG, voice: true }, { key: 'voice' });
    const audio = p.locator('.file.audio[data-voice="true"] audio');
    await audio.waitFor();
    expect(await audio.getAttribute('controls')).not.toBeNull();
    const got = await audio.evaluate(async (e: any) => {
      const res = await fetch(e.src);
      return { status: res.status, type: res.headers.get('content-type'), size: (await res.arrayBuffer()).byteLength };
    });
    expect(got).toEqual({ status: 200, type: 'audio/ogg', size: OGG.byteLength });
  });

  it('offers another file as a download link; the route refuses the link altered, and keeps the files after a reload', async () => {
    const p = page!;
    await delivery('rundoc').file({ name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF }, { key: 'k_doc' });
    const link = p.locator('.file.file a.download', { hasText: 'report.pdf' });
    await link.waitFor();
    const href = (await link.getAttribute('href'))!;
    // The link names the conversation by its public id, never by the visitor's secret.
    expect(href.startsWith(`/chat/files/${encodeURIComponent(conversationId)}/`)).toBe(true);
    expect(href).toMatch(/^\/chat\/files\/web%3Ah\.[A-Za-z0-9_-]{24}\/[0-9a-f]{32}\?expires=\d+&sig=[0-9a-f]{64}$/);
    expect(href).not.toContain((await p.locator('body').getAttribute('data-conversation'))!);
    expect(await link.getAttribute('download')).toBe('report.pdf');

    const ok = await fetch(`${world.app.address}${href}`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''report.pdf");
    expect(Buffer.from(await ok.arrayBuffer()).equals(PDF)).toBe(true);
    expect((await fetch(`${world.app.address}${href.replace(/sig=[0-9a-f]/, 'sig=x')}`)).status).toBe(403);
    expect((await fetch(`${world.app.address}${href.replace(/expires=\d+/, 'expires=99999999999')}`)).status).toBe(403);

    await p.reload();
    await p.waitForSelector('body[data-connected="true"]');
    await p.locator('.file.file a.download', { hasText: 'report.pdf' }).waitFor();
    expect(await p.locator('.file.image img').count()).toBe(1);
    expect(await p.locator('.file.audio audio').count()).toBe(1);
  });
});

describe('files of a private web chat over HTTP', { timeout: 60_000 }, () => {
  const TOKEN = 'web-token-0123456789abcdef';
  let world: World;
  beforeAll(async () => {
    world = await startWorld(redisUrl(), { STEERBOT_WEB_TOKEN: TOKEN, STEERBOT_CONSOLE_ALLOW_LOOPBACK: 'false' });
  });
  afterAll(async () => {
    await world?.stop();
  });

  it("serves a file's signed URL only with the chat's login (401 without it)", async () => {
    const conversationId = 'web:private-browser-01';
    const outbound = createWebPlugin({ token: TOKEN }, { logger, redis: world.app.ctx.redis, prefix: world.prefix }).outbound;
    await new RunDelivery({ client: world.app.ctx.redis, prefix: world.prefix, conversationId, runId: 'runpriv', resolve: () => outbound, logger }).file(
      { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF },
      { key: 'k_priv' },
    );
    const [entry] = (await world.app.ctx.redis.xrange(`${world.prefix}:{c:${conversationId}}:replies`, '-', '+')) as Array<[string, string[]]>;
    const event = JSON.parse(entry![1][1]!) as { type: string; url: string };
    expect(event.type).toBe('file');
    const without = await fetch(`${world.app.address}${event.url}`);
    expect(without.status).toBe(401);
    const withLogin = await fetch(`${world.app.address}${event.url}`, { headers: { cookie: `steerbot_web=${TOKEN}` } });
    expect(withLogin.status).toBe(200);
    expect(Buffer.from(await withLogin.arrayBuffer()).equals(PDF)).toBe(true);
  });
});
