/**
 * The operator console in a real browser: a conversation appears with its
 * active run and steering depth, the timeline shows the steering injection,
 * stop from the console ends the run `stopped`, a run whose runner is gone is
 * abandoned and the conversation recovers, a bad token gets 401 and no data,
 * user text is shown as text, and the export button downloads the conversation.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { Runs } from '../../src/protocol/runs.js';
import { queueNameFor } from '../../testing/runner-context.js';
import { waitFor } from '../../testing/wait.js';
import { type RunnerProcess, startRunnerProcess } from '../fixtures/runner-processes.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { redisUrl, testPrefix } from '../helpers/redis.js';
import { lastUserText, launchBrowser, modelScript, poll, startWorld, type World } from './harness.js';
import { releaseSlowTool, resetSlowTool, slowToolStarted } from './slow-tool.js';

const TOKEN = 'console-token-0123456789';
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1';
/** A runner in a child process (the local agent against the fake model), killed with kill -9. */
const WORKER = fileURLToPath(new URL('../fixtures/worker-process.ts', import.meta.url));

// The runner processes run on the package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

describe('operator console in a browser', { timeout: 90_000 }, () => {
  let world: World;
  let browser: Browser;
  let contexts: BrowserContext[] = [];

  beforeAll(async () => {
    world = await startWorld(redisUrl(), { STEERBOT_CONSOLE_TOKEN: TOKEN });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
  });
  afterEach(async () => {
    releaseSlowTool();
    await Promise.all(contexts.map((c) => c.close()));
    contexts = [];
  });

  async function newPage(): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    return context.newPage();
  }
  async function openChat(): Promise<{ page: Page; conversationId: string }> {
    const page = await newPage();
    await page.goto(`${world.app.address}/`);
    await page.waitForSelector('body[data-connected="true"]');
    return { page, conversationId: publicConversationId((await page.getAttribute('body', 'data-conversation'))!) };
  }
  async function say(p: Page, text: string): Promise<void> {
    await p.fill('#text', text);
    await p.press('#text', 'Enter');
  }
  async function openConsole(): Promise<Page> {
    const page = await newPage();
    const res = await page.goto(`${world.app.address}/console?token=${TOKEN}`);
    expect(res?.status()).toBe(200);
    expect(page.url()).toBe(`${world.app.address}/console`); // the token went into a cookie, out of the URL
    return page;
  }

  it('refuses a bad token with 401 and shows nothing', async () => {
    const { page: chat, conversationId } = await openChat();
    await say(chat, 'a secret conversation');
    await chat.locator('.msg.bot').waitFor();
    const page = await newPage();
    const res = await page.goto(`${world.app.address}/console?token=wrong-token-0123456789`);
    expect(res?.status()).toBe(401);
    const text = await page.textContent('body');
    expect(text?.trim()).toMatch(/^Unauthorized\s+Open the login link/);
    expect(await page.content()).not.toContain(conversationId);
    // Without the token the API answers 401 too, with no data.
    const api = await fetch(`${world.app.address}/console/api/conversations`, { headers: { authorization: 'Bearer wrong-token-0123456789' } });
    expect(api.status).toBe(401);
    expect(JSON.stringify(await api.json())).not.toContain('web:');
  });

  it('shows an active run with its steering depth, the injection in the timeline, and stops a run', async () => {
    resetSlowTool();
    const { page: chat, conversationId } = await openChat();
    await say(chat, 'slow job one');
    await waitFor(() => slowToolStarted() === 1, 10_000, 'slow tool started');
    await say(chat, 'steer this in');
    await poll(() => chat.locator('.msg.me', { hasText: 'steer this in' }).getAttribute('data-dispatch')).toBe('steered');

    const page = await openConsole();
    const row = page.locator(`tr[data-conversation="${conversationId}"]`);
    await row.waitFor();
    await poll(() => row.locator('td.state').textContent()).toBe('running');
    expect(await row.locator('td.steering').textContent()).toBe('1');
    expect(await row.locator('td.channel').textContent()).toBe('web');
    const runId = (await row.locator('td.run').textContent())!;
    expect(runId).not.toBe('');

    await row.locator('td.id a').click();
    await poll(() => page.getAttribute('#c-status', 'data-steering')).toBe('1');
    expect(await page.getAttribute('#c-status', 'data-active-run')).toBe(runId);
    if (SCREENSHOTS) await page.screenshot({ path: 'docs/console.png', fullPage: true });

    // The tool finishes: the run takes the steered message at its turn boundary; the timeline updates by itself.
    releaseSlowTool();
    await page.locator(`#timeline li[data-kind="steering.injected"][data-run="${runId}"]`).waitFor();
    await page.locator(`#timeline li[data-kind="run.ended"][data-run="${runId}"]`).waitFor();
    if (SCREENSHOTS) await chat.screenshot({ path: 'docs/web-chat.png' });

    // A second slow run, stopped from the console.
    resetSlowTool();
    await say(chat, 'slow job two');
    await waitFor(() => slowToolStarted() === 1, 10_000, 'second slow tool started');
    await poll(() => page.getAttribute('#c-status', 'data-state')).toBe('running');
    const second = (await page.getAttribute('#c-status', 'data-active-run'))!;
    await page.click('#c-actions button[data-action="stop"]');
    await poll(() => page.textContent('#c-result')).toBe('Stopping the current run.');
    const ended = page.locator(`#timeline li[data-kind="run.ended"][data-run="${second}"]`);
    await ended.waitFor();
    expect(await ended.textContent()).toContain('ended stopped');
    await page.locator('#timeline li.operator', { hasText: 'command /stop by operator (console)' }).waitFor();
    await chat.locator(`.event[data-run="${second}"][data-outcome="stopped"]`).waitFor();
  });

  it('shows markup from users as text', async () => {
    const { page: chat, conversationId } = await openChat();
    const attack = '<img src=x onerror="window.__xss = 1"><script>window.__xss = 2</script> [link](javascript:alert(1))';
    await say(chat, attack);
    await chat.locator('.msg.bot').waitFor();
    const page = await openConsole();
    await page.goto(`${world.app.address}/console#c=${encodeURIComponent(conversationId)}`);
    const li = page.locator('#timeline li[data-kind="message.received"] .text');
    await li.first().waitFor();
    expect(await li.first().textContent()).toBe(attack);
    expect(await page.locator('#timeline img, #timeline script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as any).__xss)).toBeUndefined();
    // The export button downloads the conversation as stored: the text as sent, in a file, never rendered.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#c-export')]);
    const exported = JSON.parse(readFileSync((await download.path())!, 'utf8'));
    expect(exported).toMatchObject({ format: 'steerbot.export', conversation: conversationId });
    expect(exported.record.find((e: { kind: string }) => e.kind === 'message.received').text).toBe(attack);
  });
});

describe('operator console: abandoning a run whose runner was killed', { timeout: 90_000 }, () => {
  let host: World | undefined;
  let runner: World | undefined;
  let child: RunnerProcess | undefined;
  let browser: Browser | undefined;

  afterAll(async () => {
    await child?.kill9();
    await browser?.close();
    await runner?.stop();
    await host?.stop();
  });

  it('ends the stuck run, fenced, and the waiting message is answered by a successor', async () => {
    // A host without a runner, and a runner in a child process that takes the run and is killed
    // (kill -9) while the model answers; no other runner is up, so the run stays stuck.
    const prefix = testPrefix();
    const queue = { STEERBOT_QUEUE_NAME: queueNameFor(prefix) }; // the child runner's queue
    host = await startWorld(redisUrl(), { STEERBOT_RUNNER: 'false', ...queue }, { prefix });
    host.ai.script((req) => (lastUserText(req) === 'first message' ? { text: 'never delivered', delayMs: 60_000 } : modelScript(req)));
    child = await startRunnerProcess({ redisUrl: redisUrl(), prefix, leaseMs: 1500, heartbeatMs: 300, modelUrl: host.ai.url, script: WORKER });
    browser = await launchBrowser();
    const chat = await (await browser.newContext()).newPage();
    await chat.goto(`${host.app.address}/`);
    await chat.waitForSelector('body[data-connected="true"]');
    const conversationId = publicConversationId((await chat.getAttribute('body', 'data-conversation'))!);
    await chat.fill('#text', 'first message');
    await chat.press('#text', 'Enter');
    const first = chat.locator('.msg.me', { hasText: 'first message' });
    await poll(() => first.getAttribute('data-dispatch')).toBe('new-run');
    const runId = (await first.getAttribute('data-run'))!;
    await host.ai.waitForRequests(1, 20_000); // the child took the run and asked the model
    const token = Number(await host.app.ctx.redis.hget(`${prefix}:{c:${conversationId}}:run:${runId}`, 'token'));
    await chat.fill('#text', 'are you there?');
    await chat.press('#text', 'Enter');
    await poll(() => chat.locator('.msg.me', { hasText: 'are you there?' }).getAttribute('data-dispatch')).toBe('steered');
    await child.kill9();

    const page = await (await browser.newContext()).newPage();
    await page.goto(`${host.app.address}/console#c=${encodeURIComponent(conversationId)}`);
    await poll(() => page.textContent('#c-status')).toContain('running past its lease');
    expect(await page.getAttribute('#c-status', 'data-steering')).toBe('1');
    // The "stuck" filter finds it; a filter on another channel does not.
    const stuck = (await (await fetch(`${host.app.address}/console/api/conversations?stuck=1`)).json()) as { rows: Array<{ id: string; stuck: string[] }> };
    expect(stuck.rows.map((r) => [r.id, r.stuck])).toEqual([[conversationId, ['running past its lease']]]);
    const other = (await (await fetch(`${host.app.address}/console/api/conversations?stuck=1&channel=telegram`)).json()) as { rows: unknown[] };
    expect(other.rows).toEqual([]);
    await page.click('#c-actions button[data-action="abandon"]');
    await poll(() => page.getAttribute('#c-result', 'data-ok')).toBe('true');
    const ended = page.locator(`#timeline li.operator[data-kind="run.ended"][data-run="${runId}"]`);
    await ended.waitFor();
    expect(await ended.textContent()).toContain('abandoned by operator');
    // Fenced: the killed runner's token no longer writes.
    const runs = new Runs({ client: host.app.ctx.redis, prefix });
    await expect(runs.heartbeat({ conversationId, runId, token })).rejects.toThrow();

    // A runner comes up and answers the message that waited, in a successor run.
    runner = await startWorld(redisUrl(), { STEERBOT_HOST: 'false', ...queue }, { prefix, ai: host.ai });
    const reply = chat.locator('.msg.bot', { hasText: 'are you there?' });
    await reply.waitFor({ timeout: 20_000 });
    expect(await reply.getAttribute('data-run')).not.toBe(runId);
    await poll(() => page.getAttribute('#c-status', 'data-state')).toBe('idle');
  });
});
