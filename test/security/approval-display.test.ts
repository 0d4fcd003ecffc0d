/**
 * What an approval request shows is what the person decides on. End to end
 * through the runner (host ingest → Redis → runner → local agent on the real
 * provider against the fake model): injected text has the model call a tool
 * that needs approval with arguments built to look harmless in the chat:
 * direction marks that reorder what is shown, invisible characters, a line
 * separator that starts a line of its own, and a long first argument that
 * pushes the one that matters past the request's limit.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
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
    expect(text).toContain('not shown: "to", "amount"');
  });

  it('names an argument whose name the limit cuts through', async () => {
    // `{"memo":"a…a",` is 597 characters: the limit (600) falls inside `"to"`.
    const text = await requestFor({ memo: 'a'.repeat(586), to: 'ATTACKER-IBAN', amount: 900 });
    expect(text).not.toContain('ATTACKER-IBAN');
    expect(text).toContain('not shown: "to", "amount"');
  });
});
