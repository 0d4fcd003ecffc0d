/**
 * The console's people panels in a real browser, against a webhook channel
 * under the pairing policy with an identity budget: a person's first message
 * gets a pairing code; the operator approves it from the access panel and
 * the person's conversation gets the approval notice; after a run their usage
 * shows in the person panel and in the approved list, and their export
 * downloads; the operator links and unlinks another account and purges the person.
 */
import { readFileSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { APPROVED_NOTICE } from '../../host/access/commands.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld, type World } from './harness.js';

const TOKEN = 'console-token-0123456789';
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1';
const SECRET = 'whsec-people-0123456789abcdef';
const CODE_RE = /pairing code is ([A-Z2-9]{4}-[A-Z2-9]{4})/;
const ALICE = 'webhook:crm:alice';
/** Display names sent with the messages: markup, to show the page renders it as text. */
const NAMES: Record<string, string> = { alice: '<img src=x onerror="window.__xss = 1">Alice' };

describe('console people panels in a browser', { timeout: 90_000 }, () => {
  let world: World;
  let callbacks: CallbackServer;
  let browser: Browser;
  let contexts: BrowserContext[] = [];

  beforeAll(async () => {
    callbacks = await startCallbackServer(SECRET);
    world = await startWorld(
      redisUrl(),
      { STEERBOT_CONSOLE_TOKEN: TOKEN },
      {
        config: {
          channels: { webhooks: { crm: { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 } } },
          access: { channels: { 'webhook:crm': { policy: 'pairing' } } },
          budgets: { identity: { tokensPerDay: 1_000_000, runsPerHour: 100 } },
        },
      },
    );
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await world?.stop();
    await callbacks?.close();
  });
  afterEach(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    contexts = [];
  });

  async function openConsole(hash: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await context.newPage();
    expect((await page.goto(`${world.app.address}/console?token=${TOKEN}`))?.status()).toBe(200);
    await page.goto(`${world.app.address}/console${hash}`);
    return page;
  }

  /** A signed webhook message from `sender` in conversation `conversation`. */
  async function send(conversation: string, sender: string, id: string, text: string): Promise<number> {
    const raw = JSON.stringify({ id, conversation, sender: { id: sender, name: NAMES[sender] ?? sender }, text });
    const res = await fetch(`${world.app.address}/webhooks/crm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) },
      body: raw,
    });
    return res.status;
  }
  const texts = (conversation: string) => callbacks.texts(conversation);
  const nth = (conversation: string, n: number) =>
    waitFor(() => texts(conversation).length >= n && texts(conversation), 15_000, `${n} callbacks in ${conversation}`);

  it('approves a waiting code from the access panel, and the person is told', async () => {
    expect(await send('alice-1', 'alice', 'm1', 'hello bot')).toBe(403);
    const [notice] = await nth('alice-1', 1);
    const code = CODE_RE.exec(notice!)?.[1];
    expect(code, notice).toBeDefined();

    const page = await openConsole('#panel=access');
    expect(await page.isHidden('#list-view')).toBe(true);
    const waiting = page.locator(`#waiting tr[data-account="${ALICE}"]`);
    await waiting.waitFor();
    expect(await waiting.textContent()).toContain('alice-1');
    expect(await waiting.locator('td').nth(1).textContent()).toBe(NAMES.alice);
    expect(await page.locator('#waiting img').count()).toBe(0);
    // The code is never on the page: the person passes it on.
    expect(await page.content()).not.toContain(code!);

    await page.fill('#pair-code', 'ZZZZ-ZZZZ');
    await page.click('#pair-form button[type="submit"]');
    await poll(() => page.textContent('#pair-result')).toBe('no such pairing code, or it expired');

    await page.fill('#pair-code', code!.toLowerCase());
    await page.click('#pair-form button[type="submit"]');
    await poll(() => page.getAttribute('#pair-result', 'data-ok')).toBe('true');
    expect(await page.textContent('#pair-result')).toContain(ALICE);
    expect(await nth('alice-1', 2)).toEqual([notice, APPROVED_NOTICE]);
    await page.locator(`#paired tr[data-identity="${ALICE}"]`).waitFor();
    await poll(() => page.locator('#waiting tr[data-account]').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as any).__xss)).toBeUndefined();
  });

  it("shows a person's usage after a run, in the person panel and the approved list", async () => {
    // Approved by the previous test: the message reaches the agent.
    expect(await send('alice-1', 'alice', 'm2', 'what is up')).toBe(202);
    await waitFor(() => texts('alice-1').some((t) => t.startsWith('reply to:')), 15_000, 'the reply');

    const page = await openConsole(`#panel=person&id=${encodeURIComponent(ALICE)}`);
    await poll(() => page.getAttribute('#person', 'data-identity')).toBe(ALICE);
    expect(await page.getAttribute('#p-facts', 'data-paired')).toBe('true');
    const used = (window: string) => page.getAttribute(`#p-usage tr[data-window="${window}"]`, 'data-used');
    await poll(async () => Number(await used('tokens today'))).toBeGreaterThan(0);
    expect(await used('runs this hour')).toBe('1');
    expect(await page.textContent('#p-usage tr[data-window="runs this hour"]')).toContain('100');
    if (SCREENSHOTS) await page.screenshot({ path: 'docs/console-people.png', fullPage: true });

    // The export button downloads everything kept for the person, with the conversation they wrote in.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#p-export')]);
    expect(download.suggestedFilename()).toBe('steerbot-export-webhook_crm_alice.json');
    const exported = JSON.parse(readFileSync((await download.path())!, 'utf8'));
    expect(exported).toMatchObject({ format: 'steerbot.export', identity: ALICE, approved: true });
    expect(exported.conversations).toEqual([expect.objectContaining({ conversation: 'webhook:crm:alice-1', scope: 'full' })]);
    expect(JSON.stringify(exported.conversations[0].record)).toContain('what is up');

    await page.click(`a[href="#panel=access"]`);
    const listed = page.locator(`#paired tr[data-identity="${ALICE}"]`);
    await listed.waitFor();
    expect(Number((await listed.locator('td').nth(1).textContent())!.replace(/,/g, ''))).toBe(Number(await fetchUsage()));
    // The person link opens the person panel.
    await listed.locator('a.person-link').click();
    await poll(() => page.getAttribute('#person', 'data-identity')).toBe(ALICE);
  });

  async function fetchUsage(): Promise<number> {
    const res = await fetch(`${world.app.address}/console/api/people/person?id=${encodeURIComponent(ALICE)}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    return ((await res.json()) as { usage: { tokensToday: number } }).usage.tokensToday;
  }

  it('links and unlinks an account, refuses a bad one, and purges the person after a confirm', async () => {
    const page = await openConsole(`#panel=person&id=${encodeURIComponent(ALICE)}`);
    await poll(() => page.getAttribute('#person', 'data-identity')).toBe(ALICE);

    await page.fill('#link-account', 'webhook:crm:{bad}');
    await page.click('#link-form button[type="submit"]');
    await poll(() => page.getAttribute('#p-result', 'data-ok')).toBe('false');
    expect(await page.textContent('#p-result')).toContain('identity id');

    await page.fill('#link-account', 'webhook:crm:alice-phone');
    await page.click('#link-form button[type="submit"]');
    await poll(() => page.textContent('#p-result')).toBe(`linked webhook:crm:alice-phone into ${ALICE}`);
    await poll(() => page.locator('#p-accounts li').evaluateAll((lis: any[]) => lis.map((li) => li.dataset.account))).toEqual([
      ALICE,
      'webhook:crm:alice-phone',
    ]);
    // The linked account is approved with the identity: its first message reaches the agent.
    expect(await send('alice-2', 'alice-phone', 'm1', 'from my phone')).toBe(202);
    await waitFor(() => texts('alice-2').some((t) => t.startsWith('reply to:')), 15_000, 'the reply to the linked account');

    await page.locator('#p-accounts li[data-account="webhook:crm:alice-phone"] button').click();
    await poll(() => page.textContent('#p-result')).toBe(`unlinked webhook:crm:alice-phone from ${ALICE}`);
    await poll(() => page.locator('#p-accounts li').count()).toBe(1);

    // Purge asks first, naming the person; accepted, the approval and the usage are gone.
    const asked: string[] = [];
    page.once('dialog', (d) => {
      asked.push(d.message());
      void d.accept();
    });
    await page.click('#p-purge');
    await poll(() => page.textContent('#p-result')).toBe(`purged ${ALICE}`);
    expect(asked).toEqual([expect.stringContaining(`Purge ${ALICE}`)]);
    await poll(() => page.getAttribute('#p-facts', 'data-paired')).toBe('false');
    await poll(() => page.locator('#p-usage tr[data-window="tokens today"]').getAttribute('data-used')).toBe('0');
  });
});
