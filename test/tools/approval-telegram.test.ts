/**
 * Approval end to end over Telegram: the Telegram webhook (real grammY
 * plugin) → the real channel host → Redis → BullMQ → runner with the local
 * agent (real OpenAI-compatible provider, fake model) → the approval request
 * in the chat (fake Bot API) with an inline keyboard → a button click (the
 * callback query answered, the message edited) or `/approve` / `/deny` sent
 * in the chat → the tool runs once (or not) → the answer arrives. Also: an MCP tool
 * (not read-only, destructive) under approval by default, a user who may not decide.
 */
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { HttpServer } from '../../host/http.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { ToolboxOptions } from '../../plugins/local-agent/toolbox.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import {
  ALICE,
  callbackQueryUpdate,
  type FakeTelegram,
  messageUpdate,
  type SentMessage,
  startFakeTelegram,
  type TgUser,
} from '../../testing/fakes/telegram-server.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from '../channels/telegram-harness.js';
import { fakeModel, RunnerHarness, refundTool } from '../runner/harness.js';
import { mcpFrameBody } from './mcp-frame.js';

const SECRET = 'e2e_secret_0123456789';
const CONVERSATION = `telegram:${ALICE.id}`;
const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));
const BOB: TgUser = { id: 2002, is_bot: false, first_name: 'Bob' };

let ai: FakeOpenAIServer;
let tg: FakeTelegram;
let h: RunnerHarness;
let http: HttpServer;
let plugin: ChannelPlugin;
let runs: number[];

const refund = refundTool((amount) => runs.push(amount));
/** A tool whose argument is free text: what a person asks the agent to keep ends up in it. */
const saveNote: AgentTool<{ text: string }> = {
  name: 'save_note',
  description: 'saves a note',
  inputSchema: z.object({ text: z.string() }),
  execute: async ({ text }) => ({ saved: text.length }),
};

async function boot(toolbox: ToolboxOptions): Promise<void> {
  runs = [];
  h = await RunnerHarness.start();
  ({ http, plugin } = await startTelegramSystem({
    h,
    tg,
    secret: SECRET,
    agent: createLocalAgentPlugin({ model: fakeModel(ai.url), tools: [refund, saveNote], builtins: { currentTime: false }, toolbox }),
  }));
}

beforeEach(async () => {
  ai = await startFakeOpenAI();
  tg = await startFakeTelegram();
});
afterEach(() => stopTelegramSystem({ plugin, http }, h, tg, ai));

async function say(text: string, from: TgUser = ALICE): Promise<void> {
  expect(await postUpdate(http, SECRET, messageUpdate({ text, from, chatId: ALICE.id }))).toBe(200);
}

/** Clicks a button of the bot's message `m`. */
async function click(m: SentMessage, data: string, from: TgUser = ALICE): Promise<number> {
  return postUpdate(http, SECRET, callbackQueryUpdate({ data, message: m, from }));
}

/** Waits for the bot's n-th message (1-based) and returns its text. */
const nth = async (n: number, what: string) => (await tg.waitUntil(() => tg.sent.length >= n && tg.sent, 15_000, what))[n - 1]!.text;
const approvalIdIn = (text: string) => /\/approve (ap_[0-9a-f]{24})/.exec(text)?.[1] ?? '';

describe('approval over Telegram', () => {
  it('asks in the chat; /approve runs the tool once and the answer arrives; a second /approve changes nothing', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 12 } }] }, { text: 'Refunded 12.' }]);
    await boot({ policy: { tools: { refund: 'require_approval' } } });
    await say('refund my 12');
    const request = await nth(1, 'the approval request');
    expect(request).toContain('refund');
    expect(request).toContain('"amount":12');
    const id = approvalIdIn(request);

    await say(`/approve ${id}`);
    expect(await nth(2, 'the command reply')).toBe('Approved: refund will run.');
    expect(await nth(3, 'the answer')).toBe('Refunded 12.');
    expect(runs).toEqual([12]);
    await h.idle(15_000, CONVERSATION);

    await say(`/approve ${id}`);
    expect(await nth(4, 'the second reply')).toBe('Already decided: approved by Alice Liddell. Nothing changed.');
    expect(runs).toEqual([12]);
  });

  it('shows Approve / Deny buttons; a click answers the query, edits the message to the decision and who made it, and the tool runs once', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 40 } }] }, { text: 'Refunded 40.' }]);
    await boot({ policy: { tools: { refund: 'require_approval' } } });
    await say('refund 40');
    await nth(1, 'the approval request');
    const request = tg.sent[0]!;
    const id = approvalIdIn(request.text);
    expect(request.buttons).toEqual([
      { text: 'Approve', data: `/approve ${id}` },
      { text: 'Deny', data: `/deny ${id}` },
    ]);

    // Bob is not allowed: told so in a toast, the message keeps its buttons.
    expect(await click(request, `/approve ${id}`, BOB)).toBe(200);
    await tg.waitUntil(() => tg.callbackAnswers.length >= 1, 15_000, 'the first answer');
    expect(tg.callbackAnswers[0]!.text).toBe('You are not allowed to decide this request. Nothing changed.');
    expect(tg.sent[0]!.buttons).toHaveLength(2);
    expect(runs).toEqual([]);

    expect(await click(request, `/approve ${id}`)).toBe(200);
    expect(await nth(2, 'the answer')).toBe('Refunded 40.');
    expect(runs).toEqual([40]);
    expect(tg.callbackAnswers[1]!.text).toBe('Approved: refund will run.');
    expect(tg.sent[0]!.text).toContain('Approved by Alice Liddell.');
    expect(tg.sent[0]!.buttons).toBeUndefined();

    // A second click (a stale keyboard in another client) changes nothing.
    await h.idle(15_000, CONVERSATION);
    expect(await click(request, `/deny ${id}`)).toBe(200);
    await tg.waitUntil(() => tg.callbackAnswers.length >= 3, 15_000, 'the third answer');
    expect(tg.callbackAnswers[2]!.text).toBe('Already decided: approved by Alice Liddell. Nothing changed.');
    expect(tg.sent).toHaveLength(2);
    expect(runs).toEqual([40]);
  });

  // The credential patterns the request is redacted with used to scan on from every word start of `a.a.a.…`: about
  // 30 s of the one thread for these 160 KB. The timeout is what fails when the thread is held.
  it('asks at once for a call whose argument is 160 KB of crafted text (a.a.a.…), its arguments cut to the request’s limit', {
    timeout: 10_000,
  }, async () => {
    const crafted = 'a.'.repeat(80_000);
    ai.script([{ toolCalls: [{ id: 'call_n', name: 'save_note', args: { text: crafted } }] }, { text: 'Saved.' }]);
    await boot({ policy: { tools: { save_note: 'require_approval' } } });
    await say('keep this note for me');
    const request = await nth(1, 'the approval request');
    expect(request).toContain(`run save_note with {"text":"${'a.'.repeat(200)}`);
    expect(request.length).toBeLessThan(1000);
  });

  it('/deny: the tool does not run and the model is told', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 99 } }] }, { text: 'I did not refund.' }]);
    await boot({ policy: { tools: { refund: 'require_approval' } } });
    await say('refund 99');
    const id = approvalIdIn(await nth(1, 'the approval request'));
    await say(`/deny ${id}`);
    expect(await nth(3, 'the answer')).toBe('I did not refund.');
    expect(runs).toEqual([]);
    const told = JSON.parse(ai.requests[1]!.body.messages.at(-1).content);
    expect(told).toMatchObject({ error: { tool: 'refund', category: 'denied' } });
  });

  it('someone else in the chat may not decide; the timeout then denies', async () => {
    ai.script([{ toolCalls: [{ id: 'call_r', name: 'refund', args: { amount: 5 } }] }, { text: 'Nobody approved it.' }]);
    await boot({ policy: { tools: { refund: 'require_approval' }, approvalTimeoutMs: 1500 } });
    await say('refund 5');
    const id = approvalIdIn(await nth(1, 'the approval request'));
    await say(`/approve ${id}`, BOB);
    expect(await nth(2, 'the refusal')).toBe('You are not allowed to decide this request. Nothing changed.');
    expect(await nth(3, 'the answer')).toBe('Nobody approved it.');
    expect(runs).toEqual([]);
    expect(JSON.parse(ai.requests[1]!.body.messages.at(-1).content)).toMatchObject({ error: { category: 'approval_timeout' } });
  });

  it('asks for an MCP tool that is not read-only, saying it is destructive; a click runs it', async () => {
    ai.script([{ toolCalls: [{ id: 'call_rm', name: 'fx__remove', args: { id: 'r7' } }] }, { text: 'Removed r7.' }]);
    await boot({ mcpServers: { fx: { command: process.execPath, args: [FIXTURE], tools: ['remove'] } } });
    await say('remove r7');
    const text = await nth(1, 'the approval request');
    expect(text).toContain('run fx__remove with {"id":"r7"}');
    expect(text).toContain('This tool is marked destructive: it may delete or overwrite data.');
    expect(ai.requests).toHaveLength(1);
    expect(await click(tg.sent[0]!, `/approve ${approvalIdIn(text)}`)).toBe(200);
    expect(await nth(2, 'the answer')).toBe('Removed r7.');
    expect(ai.requests[1]!.body.messages.at(-1)).toMatchObject({ role: 'tool' });
    expect(mcpFrameBody(ai.requests[1]!.body.messages.at(-1).content, 'fx')).toBe('removed r7');
  });
});
