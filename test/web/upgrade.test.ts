/**
 * A web chat conversation started before public ids, in a real browser: the
 * previous release named it by the visitor's secret (`web:<secret>`, sender
 * and chat id `<secret>`). The page that still holds that secret finds its
 * history and goes on in the same conversation; once the conversation is
 * purged, its next message starts the public id's conversation.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IngestService } from '../../host/ingest.js';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { Dispatch } from '../../src/protocol/dispatch.js';
import { bullPrefixFor, RunQueue } from '../../src/protocol/run-queue.js';
import { replyStreamKey } from '../../src/reply-stream.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, startWorld, type World } from './harness.js';

describe('a web chat conversation started before public ids', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let connection: Redis;
  let queue: RunQueue;

  beforeAll(async () => {
    world = await startWorld(redisUrl());
    browser = await launchBrowser();
    connection = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    queue = new RunQueue({ connection, name: world.config.runs.queueName, bullPrefix: bullPrefixFor(world.prefix) });
  });
  afterAll(async () => {
    await queue?.close();
    await connection?.quit();
    await browser?.close();
    await world?.stop();
  });

  const log = (conversationId: string) => `${world.prefix}:{c:${conversationId}}:log`;
  /** The record's `message.received` entries of a conversation. */
  const received = async (conversationId: string) =>
    (await world.app.ctx.redis.xrange(log(conversationId), '-', '+'))
      .map(([, fields]) => JSON.parse(fields[fields.indexOf('e') + 1] ?? '{}') as { kind: string; text?: string; sender?: { id: string } })
      .filter((e) => e.kind === 'message.received');
  const shown = async (conversationId: string) =>
    (await world.app.ctx.redis.xrange(replyStreamKey(world.prefix, conversationId), '-', '+')).map(([, fields]) => fields[1] ?? '').join('\n');

  async function say(page: Page, text: string): Promise<void> {
    await page.fill('#text', text);
    await page.press('#text', 'Enter');
    await page.locator('.msg.bot', { hasText: `reply to: ${text}` }).waitFor();
  }

  it('keeps its history and its ids for the page that holds the secret, until it is purged', async () => {
    // What the previous release's web chat ingested: every id is the page's secret.
    const secret = randomBytes(16).toString('base64url');
    const legacy = `web:${secret}`;
    const ingest = new IngestService(new Dispatch({ client: world.app.ctx.redis, prefix: world.prefix }), queue);
    await ingest.ingest(
      { conversationId: legacy, updateKey: `${legacy}:m0`, sender: { id: secret, name: 'web user' }, text: 'words from before', messageId: 'm0' },
      { channel: 'web' },
    );
    await waitFor(async () => (await shown(legacy)).includes('reply to: words from before'), 15_000, 'the old conversation answered');

    const page = await (await browser.newContext()).newPage();
    try {
      await page.goto(`${world.app.address}/`);
      await page.evaluate((s) => localStorage.setItem('steerbot.conversation', s), secret);
      await page.reload();
      await page.waitForSelector('body[data-connected="true"]');
      // Its history, and the next message goes on in the same conversation, sent by the same sender.
      await page.locator('.msg.me', { hasText: 'words from before' }).waitFor();
      await page.locator('.msg.bot', { hasText: 'reply to: words from before' }).waitFor();
      await say(page, 'words after the upgrade');
      expect((await received(legacy)).map((e) => [e.text, e.sender?.id])).toEqual([
        ['words from before', secret],
        ['words after the upgrade', secret],
      ]);
      expect(await world.app.ctx.redis.exists(log(publicConversationId(secret)))).toBe(0);

      // Purged (the operator's console): the secret's next message starts its public id's conversation.
      const purged = await fetch(`${world.app.address}/console/api/conversations/${encodeURIComponent(legacy)}/actions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'purge' }),
      });
      expect(purged.status).toBe(200);
      await page.reload();
      await page.waitForSelector('body[data-connected="true"]');
      await say(page, 'words after the purge');
      expect(await page.locator('.msg.me', { hasText: 'words from before' }).count()).toBe(0);
      expect((await received(publicConversationId(secret))).map((e) => [e.text, e.sender?.id])).toEqual([
        ['words after the purge', publicConversationId(secret).slice('web:'.length)],
      ]);
      expect(await world.app.ctx.redis.exists(log(legacy))).toBe(0);
    } finally {
      await page.context().close();
    }
  });
});
