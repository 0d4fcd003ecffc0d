/**
 * A cookie planted in the operator's browser under the login cookie's name:
 * a network attacker answering any plain-HTTP request to the host's name (or
 * a sibling subdomain) sets `steerbot_console=<junk>; Path=/console`. The
 * browser then sends it before the login's own (`Path=/`, a shorter path),
 * with every console request. The operator, logged in with the real secret,
 * must still get in; the planted value alone opens nothing.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from '../web/harness.js';

const TOKEN = 'console-token-cookies-0123456789';

describe('a cookie planted under the console login’s name', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;

  beforeAll(async () => {
    world = await startWorld(
      redisUrl(),
      { STEERBOT_CONSOLE_TOKEN: TOKEN, STEERBOT_RUNNER: 'false', STEERBOT_CONSOLE_ALLOW_LOOPBACK: 'false' },
      { noModel: true },
    );
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
  });

  it('does not lock the logged-in operator out of the console, and opens nothing by itself', async () => {
    const context = await browser.newContext();
    const { hostname } = new URL(world.app.address!);
    await context.addCookies([{ name: 'steerbot_console', value: 'planted-by-the-attacker', domain: hostname, path: '/console' }]);
    const page = await context.newPage();
    // Before the login, the planted cookie is all there is: refused.
    expect((await page.goto(`${world.app.address}/console`))?.status()).toBe(401);

    const login = await page.goto(`${world.app.address}/console?token=${TOKEN}`);
    expect(login?.status()).toBe(200);
    // Both cookies are in the jar, and the browser sends the planted one first.
    expect((await context.cookies()).filter((c) => c.name === 'steerbot_console').map((c) => c.path)).toEqual(expect.arrayContaining(['/', '/console']));
    const sent = await page.evaluate(async () => (await fetch('/console/api/queue', { credentials: 'same-origin' })).status);
    expect(sent).toBe(200);
    await poll(() => page.textContent('#status')).toMatch(/^updated /);
    await context.close();
  });
});
