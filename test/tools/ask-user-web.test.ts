/**
 * `ask_user` end to end in the web chat, in a real browser (playwright-core
 * driving Chromium) against steerbot started as `startApp` builds it, with
 * the local agent on the real OpenAI-compatible provider (fake model), in
 * the conversation every channel holds (ask-user-flow.ts): the question
 * shows with one button per option under it; a click on option 2 sends the
 * button's command (`/choose <id> <n>`) through the page's message POST and
 * disables the buttons, "Chosen: …" comes back as a message of its own, and
 * the model gets the answer; a message written instead of choosing the
 * second question joins the run as the answer, and the record's
 * `question.answered` disables that question's buttons too.
 */
import type { Browser, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { redisUrl } from '../helpers/redis.js';
import { launchBrowser, poll, startWorld } from '../web/harness.js';
import * as flow from './ask-user-flow.js';

const w = flow.askUserWorld({ harness: false });

describe('ask_user in the web chat', () => {
  it('shows buttons under the question; a click on option 2 in the browser is the answer; a message written instead is the next answer', {
    timeout: 90_000,
  }, async () => {
    const world = await startWorld(redisUrl(), {}, { ai: w.ai, agent: { askUser: true } });
    w.closers.push(() => world.stop());
    const browser: Browser = await launchBrowser();
    w.closers.push(() => browser.close());
    const page: Page = await (await browser.newContext()).newPage();
    await page.goto(`${world.app.address}/`);
    await page.waitForSelector('body[data-connected="true"]');
    const say = async (text: string) => {
      await page.fill('#text', text);
      await page.press('#text', 'Enter');
    };
    const bodies = () => page.locator('.msg.bot .body').allTextContents();

    await say('book me a plan');
    const q = page.locator('.msg.bot', { hasText: flow.PLAN.question });
    const buttons = q.locator('.actions button');
    await buttons.first().waitFor();
    expect(await buttons.allTextContents()).toEqual(flow.PLAN.options);
    const id = flow.questionIdIn((await buttons.first().getAttribute('data-command')) ?? '');
    expect(await Promise.all((await buttons.all()).map((b) => b.getAttribute('data-command')))).toEqual(flow.chooseCommands(id, flow.PLAN));

    await buttons.nth(1).click();
    expect(await buttons.nth(0).isDisabled()).toBe(true);
    await page.locator('.msg.bot', { hasText: flow.BOOKED }).waitFor();
    expect(flow.toolResultOf(w.ai, 1)).toEqual({ answer: 'Pro', option: 2, by: 'web user' });
    await page.locator(`.event[data-question="${id}"][data-decision="answered"]`).waitFor();
    await poll(async () => (await bodies()).length).toBe(3);
    expect((await bodies())[0]).toBe(flow.questionText(flow.PLAN));
    flow.expectChosenAndBooked((await bodies()).slice(1));

    await say('when does it start?');
    const q2 = page.locator('.msg.bot', { hasText: flow.START.question });
    const buttons2 = q2.locator('.actions button');
    await buttons2.first().waitFor();
    expect(await buttons2.allTextContents()).toEqual(flow.START.options);
    const id2 = flow.questionIdIn((await buttons2.first().getAttribute('data-command')) ?? '');
    await say(flow.TYPED);
    await page.locator('.msg.bot', { hasText: flow.STARTS }).waitFor();
    flow.expectTypedAnswer(w.ai, 3, flow.TYPED);
    // Answered by the message: the options stay under the question, disabled.
    await page.locator(`.event[data-question="${id2}"][data-decision="typed"]`).waitFor();
    await poll(() => buttons2.first().isDisabled()).toBe(true);
    await page.locator('.event[data-outcome="completed"]').nth(1).waitFor();
    expect((await bodies()).slice(3)).toEqual([flow.questionText(flow.START), flow.STARTS]);
    expect(await bodies()).toHaveLength(5);
    expect(w.ai.requests).toHaveLength(4);
  });
});
