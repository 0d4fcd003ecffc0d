/**
 * The web chat in a real browser (Debian's Chromium, playwright-core):
 * messages go through the host's ingest path, replies stream back over
 * server-sent events, a message sent while a slow tool runs is steered into
 * the same run, `/stop` cuts a run off, and user text is shown as text.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { LONG_ANSWER, launchBrowser, poll, startWorld, type World } from './harness.js';
import { releaseSlowTool, resetSlowTool, slowToolStarted } from './slow-tool.js';

describe('web chat in a browser', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    world = await startWorld(redisUrl());
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
  });
  afterEach(async () => {
    releaseSlowTool();
    await page?.context().close();
  });

  async function openChat(): Promise<Page> {
    const context = await browser.newContext();
    page = await context.newPage();
    await page.goto(`${world.app.address}/`);
    await page.waitForSelector('body[data-connected="true"]');
    return page;
  }
  async function say(p: Page, text: string): Promise<void> {
    await p.fill('#text', text);
    await p.press('#text', 'Enter');
  }

  it('sends a message and shows the dispatch result and the streamed reply', async () => {
    const p = await openChat();
    await say(p, 'hello there');
    const mine = p.locator('.msg.me', { hasText: 'hello there' });
    await poll(() => mine.getAttribute('data-dispatch')).toMatch(/new-run|injected/);
    const reply = p.locator('.msg.bot', { hasText: 'reply to: hello there' });
    await reply.waitFor();
    // The reply names the run that answered it, the same run the message started.
    expect(await reply.getAttribute('data-run')).toBe(await mine.getAttribute('data-run'));
    await p.locator('.event[data-outcome="completed"]').waitFor();
  });

  it('streams a long answer into one message, edited in place', async () => {
    const p = await openChat();
    await say(p, 'stream me something');
    // While the model writes, the reply shows what it has so far.
    await p.locator('.msg.bot.streaming').waitFor();
    const partial = await p.locator('.msg.bot .body').first().textContent();
    expect(LONG_ANSWER.startsWith(partial ?? 'x')).toBe(true);
    expect(partial).not.toBe(LONG_ANSWER);
    await p.locator('.msg.bot:not(.streaming)', { hasText: LONG_ANSWER }).waitFor();
    expect(await p.locator('.msg.bot').count()).toBe(1);
  });

  it('marks a message sent during a slow tool as steered, answered by the same run', async () => {
    resetSlowTool();
    const p = await openChat();
    await say(p, 'please go slow');
    await waitFor(() => slowToolStarted() === 1, 10_000, 'slow tool started');
    // The tool call is shown while it runs.
    await p.locator('.event.tool[data-tool="slow_tool"][data-state="running"]').waitFor();
    await say(p, 'and also this');
    const first = p.locator('.msg.me', { hasText: 'please go slow' });
    const second = p.locator('.msg.me', { hasText: 'and also this' });
    await poll(() => second.getAttribute('data-dispatch')).toBe('steered');
    await poll(() => first.getAttribute('data-dispatch')).toBe('new-run');
    const run = await first.getAttribute('data-run');
    expect(await second.getAttribute('data-run')).toBe(run);
    releaseSlowTool();
    // Taken at the next turn boundary, and answered by that run.
    await poll(() => second.getAttribute('data-dispatch')).toBe('injected');
    await p.locator('.event.tool[data-tool="slow_tool"][data-state="done"]').waitFor();
    // One answer to both: the model saw the steered message in the same run.
    const reply = p.locator('.msg.bot', { hasText: 'reply to: please go slow + and also this' });
    await reply.waitFor();
    expect(await reply.getAttribute('data-run')).toBe(run);
    expect(await p.locator(`.event[data-run="${run}"][data-outcome]`).getAttribute('data-outcome')).toBe('completed');
  });

  it('cuts a run off with /stop', async () => {
    resetSlowTool();
    const p = await openChat();
    await say(p, 'slow work please');
    await waitFor(() => slowToolStarted() === 1, 10_000, 'slow tool started');
    // The run id comes with the page's answer to its POST, which may land after the tool started.
    const mine = p.locator('.msg.me', { hasText: 'slow work please' });
    await poll(() => mine.getAttribute('data-dispatch')).toBe('new-run');
    const run = await mine.getAttribute('data-run');
    await say(p, '/stop');
    await p.locator('.msg.bot', { hasText: 'Stopping the current run.' }).waitFor();
    await p.locator(`.event[data-run="${run}"][data-outcome="stopped"]`).waitFor();
    expect(await p.locator('.msg.me', { hasText: '/stop' }).getAttribute('data-dispatch')).toBe('command');
  });

  it('shows markup in messages and replies as text', async () => {
    const p = await openChat();
    const attack = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"> **bold** <b>b</b>';
    await say(p, attack);
    await p.locator('.msg.bot', { hasText: `reply to: ${attack}` }).waitFor();
    expect(await p.locator('.msg.me .body').first().textContent()).toBe(attack);
    expect(await p.locator('#log img, #log script, #log b').count()).toBe(0);
    expect(await p.evaluate(() => (globalThis as any).__xss)).toBeUndefined();
  });

  it('keeps the conversation across a reload (history replayed from Redis)', async () => {
    const p = await openChat();
    await say(p, 'remember me');
    await p.locator('.msg.bot', { hasText: 'reply to: remember me' }).waitFor();
    await p.reload();
    await p.waitForSelector('body[data-connected="true"]');
    await p.locator('.msg.me', { hasText: 'remember me' }).waitFor();
    await p.locator('.msg.bot', { hasText: 'reply to: remember me' }).waitFor();
  });
});

describe('web chat with no model configured', { timeout: 90_000 }, () => {
  it('answers with one clear message naming the variables to set', async () => {
    const world = await startWorld(redisUrl(), {}, { noModel: true });
    const browser = await launchBrowser();
    try {
      const p = await browser.newPage();
      await p.goto(`${world.app.address}/`);
      await p.waitForSelector('body[data-connected="true"]');
      await p.fill('#text', 'hello?');
      await p.press('#text', 'Enter');
      const notice = p.locator('.msg.bot');
      await notice.waitFor();
      const text = (await notice.textContent()) ?? '';
      for (const name of ['OPENAI_API_KEY', 'STEERBOT_MODEL_PROVIDER', 'OPENAI_BASE_URL']) expect(text).toContain(name);
      await p.locator('.event[data-outcome="failed"]').waitFor();
      expect(await p.locator('.msg.bot').count()).toBe(1);
      expect(world.ai.requests).toHaveLength(0);
      // The process is still serving.
      expect((await fetch(`${world.app.address}/healthz`)).status).toBe(200);
    } finally {
      await browser.close();
      await world.stop();
    }
  });
});
