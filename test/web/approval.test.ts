/**
 * A tool approval in the web chat, in a real browser: the request shows
 * Approve / Deny buttons under the bot's message; a click sends the button's
 * command through the page's ordinary message POST, disables the buttons (a
 * decision is sent once), and the tool runs once before the answer arrives.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from './harness.js';
import { releaseSlowTool, resetSlowTool, slowToolStarted } from './slow-tool.js';

describe('tool approval in the web chat', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let page: Page | undefined;

  beforeAll(async () => {
    world = await startWorld(redisUrl(), {}, { agent: { toolPolicy: { tools: { slow_tool: 'require_approval' } } } });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    releaseSlowTool();
    await page?.context().close();
    await browser?.close();
    await world?.stop();
  });

  it('shows Approve / Deny buttons; approving runs the tool once and the answer arrives', async () => {
    // The tool finishes at once when it runs: the test counts its calls.
    resetSlowTool();
    releaseSlowTool();
    page = await (await browser.newContext()).newPage();
    const p = page;
    await p.goto(`${world.app.address}/`);
    await p.waitForSelector('body[data-connected="true"]');
    await p.fill('#text', 'please go slow');
    await p.press('#text', 'Enter');

    const request = p.locator('.msg.bot', { hasText: 'slow_tool' });
    const approve = request.locator('.actions button', { hasText: 'Approve' });
    const deny = request.locator('.actions button', { hasText: 'Deny' });
    await approve.waitFor();
    const id = /\/approve (\S+)/.exec((await request.locator('.body').textContent()) ?? '')?.[1];
    expect(id).toBeTruthy();
    expect(await approve.getAttribute('data-command')).toBe(`/approve ${id}`);
    expect(await deny.getAttribute('data-command')).toBe(`/deny ${id}`);
    expect(slowToolStarted()).toBe(0);

    await approve.click();
    // Both buttons are disabled at once: a second click cannot send the decision again.
    expect(await approve.isDisabled()).toBe(true);
    expect(await deny.isDisabled()).toBe(true);
    await p.locator('.msg.me', { hasText: `/approve ${id}` }).waitFor();
    await p.locator('.msg.bot', { hasText: 'reply to: please go slow' }).waitFor();
    await p.locator(`.event[data-approval="${id}"][data-decision="approved"]`).waitFor();
    await p.locator('.event[data-outcome="completed"]').waitFor();
    expect(slowToolStarted()).toBe(1);
    // The decision went out once: one message with the command, the tool ran once.
    expect(await p.locator('.msg.me', { hasText: `/approve ${id}` }).count()).toBe(1);

    // After a reload (history replayed from Redis) the decided request's buttons stay disabled.
    await p.reload();
    await p.waitForSelector('body[data-connected="true"]');
    await approve.waitFor();
    await poll(() => approve.isDisabled()).toBe(true);
    expect(await deny.isDisabled()).toBe(true);
  });
});
