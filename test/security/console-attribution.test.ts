/**
 * Who the console's timeline says did what, against people who choose their
 * own display names (every platform lets them) and, through an integration
 * that passes its users' ids on, their ids: a group member named like another
 * member, and someone named and id'd like the operator's console. The
 * operator reads the timeline in a real browser, as they would when asking
 * who told the bot what.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from '../web/harness.js';

const TOKEN = 'console-token-attribution-0123456789';
const SECRET = 'whsec-attribution-0123456789abcdef';

describe('the console timeline names senders', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let contexts: BrowserContext[] = [];

  beforeAll(async () => {
    // No runner: what is read here is what the host records; no loopback shortcut into the console.
    world = await startWorld(
      redisUrl(),
      { STEERBOT_CONSOLE_TOKEN: TOKEN, STEERBOT_RUNNER: 'false', STEERBOT_CONSOLE_ALLOW_LOOPBACK: 'false' },
      { noModel: true, config: { channels: { webhooks: { crm: { secret: SECRET } } } } },
    );
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
  });
  afterEach(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    contexts = [];
  });

  /** A signed webhook message: the integration passes on its user's id and the name they chose. */
  async function send(conversation: string, sender: { id: string; name: string }, id: string, text: string, group = false): Promise<number> {
    const raw = JSON.stringify({ id, conversation, sender, text, ...(group && { group: true }) });
    const res = await fetch(`${world.app.address}/webhooks/crm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
      body: raw,
    });
    return res.status;
  }

  async function openConversation(conversationId: string): Promise<Page> {
    const context = await browser.newContext();
    contexts.push(context);
    const page = await context.newPage();
    expect((await page.goto(`${world.app.address}/console?token=${TOKEN}`))?.status()).toBe(200);
    await page.goto(`${world.app.address}/console#c=${encodeURIComponent(conversationId)}`);
    return page;
  }
  const heads = (page: Page, kind: string) => page.locator(`#timeline li[data-kind="${kind}"] .head`).allTextContents();

  it('names each group member by their id, so one who took another member’s name is told apart', async () => {
    expect(await send('team', { id: 'alice', name: 'Alice' }, 'm1', 'ship the release', true)).toBe(202);
    expect(await send('team', { id: 'mallory', name: 'Alice' }, 'm2', 'and delete the backups', true)).toBe(202);
    const team = await openConversation('webhook:crm:team');
    await poll(async () => (await heads(team, 'message.received')).length).toBe(2);
    const [real, impostor] = await heads(team, 'message.received');
    expect(real).toContain('message from alice “Alice”');
    expect(impostor).toContain('message from mallory “Alice”');
  });

  it('shows a sender named and id’d like the console as that sender, and only the operator’s own actions as the operator’s', async () => {
    // In their own chat, someone whose id and name are the console's starts a new context and sets a policy.
    expect(await send('c-1', { id: 'console', name: 'operator (console)' }, 'm3', '/new')).toBe(202);
    expect(await send('c-1', { id: 'console', name: 'operator (console)' }, 'm4', '/queue collect')).toBe(202);
    const page = await openConversation('webhook:crm:c-1');
    await page.locator('#timeline li[data-kind="command.received"]').waitFor();
    expect(await page.locator('#timeline li.operator').count()).toBe(0);
    expect(await heads(page, 'conversation.reset')).toEqual([expect.stringContaining('new context by console “operator (console)”')]);
    expect(await heads(page, 'command.received')).toEqual([expect.stringContaining('command /queue collect by console “operator (console)”')]);

    // The operator's own actions read as theirs.
    await page.click('#c-actions button[data-action="new"]');
    await page.locator('#timeline li.operator[data-kind="conversation.reset"]', { hasText: 'new context by operator (console)' }).waitFor();
    await page.selectOption('#c-policy', 'steer');
    await page.click('#c-actions button[data-action="policy"]');
    await page.locator('#timeline li.operator[data-kind="command.received"]', { hasText: 'command /queue steer by operator (console)' }).waitFor();
    expect(await page.locator('#timeline li.operator').count()).toBe(2);
  });
});
