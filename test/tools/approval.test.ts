/**
 * Tool policy and approval, end to end through the runner (host ingest →
 * Redis → runner → local agent on the real provider against the fake model):
 * a `require_approval` tool asks in the chat and runs once approved; denied,
 * timed out, decided by someone not allowed, decided twice; a denied tool is
 * not offered. Policy resolution is unit-tested below.
 */

import type { Command, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { approvalCommand } from '../../host/commands/approvals.js';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { channelOf, ToolPolicy, type ToolPolicySettings } from '../../plugins/local-agent/policy.js';
import { readApproval } from '../../src/protocol/approvals.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID, fakeModel, perTestModel, RunnerHarness, waitFor } from '../runner/harness.js';

const t = perTestModel();

function payTool(): { tool: AgentTool<{ amount: number; cardNumber?: string | undefined }>; runs: number[] } {
  const runs: number[] = [];
  return {
    runs,
    tool: {
      name: 'pay',
      description: 'pays an amount',
      inputSchema: z.object({ amount: z.number(), cardNumber: z.string().optional() }),
      execute: async ({ amount }) => {
        runs.push(amount);
        return { paid: amount };
      },
    },
  };
}
const lookup: AgentTool = { name: 'lookup', description: 'looks up', inputSchema: z.object({}), execute: async () => ({ found: true }) };

async function start(policy: ToolPolicySettings, tools: AgentTool[]) {
  t.h = await RunnerHarness.start({
    plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools, builtins: { currentTime: false }, toolbox: { policy } }),
  });
  return t.h;
}

/** Waits for the approval request message and returns its id. */
async function approvalId(h: RunnerHarness): Promise<string> {
  const [msg] = await h.outbound.waitForMessages(1);
  const m = /Reply \/approve (ap_[0-9a-f]{24}) or \/deny/.exec(msg!.text);
  if (!m) throw new Error(`not an approval request: ${msg!.text}`);
  return m[1]!;
}
const source = (h: RunnerHarness, id = 'u1', name = 'Ann') => ({ ...h.source(), sender: { id, name } });
const lastToolResult = (i: number) => JSON.parse(t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content);

describe('tool approval', () => {
  it("asks in the chat (tool and arguments, secrets redacted), runs the tool once approved by the run's user, then answers", async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 30, cardNumber: '4111111111111111' } }] }, { text: 'Paid 30.' }]);
    const h = await start({ tools: { pay: 'require_approval' } }, [pay.tool]);
    const r = (await h.ingest('pay 30')) as { runId: string };
    const id = await approvalId(h);
    const request = h.outbound.texts[0]!;
    expect(request).toContain('`pay`');
    expect(request).toContain('"amount":30');
    expect(request).not.toContain('4111111111111111');
    expect(pay.runs).toEqual([]);
    // A message sent during the wait follows the input policy (steer): it joins the run after the tool batch.
    expect(await h.ingest('and send me the receipt')).toMatchObject({ kind: 'steered', runId: r.runId });

    // Someone else may not decide; nothing changes.
    expect((await approvalCommand(h, 'approved', id, source(h, 'u2', 'Mallory'))).reply).toContain('not allowed');
    expect((await readApproval(h.ctx.redis, h.prefix, CID, id))?.status).toBe('pending');
    expect((await approvalCommand(h, 'approved', id, source(h))).reply).toBe('Approved: pay will run.');
    await h.runEnded(r.runId);
    expect(pay.runs).toEqual([30]);
    expect(h.outbound.texts.at(-1)).toBe('Paid 30.');
    expect(JSON.stringify(t.fake.requests[1]!.body.messages.at(-1))).toContain('and send me the receipt');
    // A second click changes nothing and says how it was decided.
    expect((await approvalCommand(h, 'denied', id, source(h))).reply).toBe('Already decided: approved by Ann. Nothing changed.');
    // Request and decision are in the record.
    expect((await h.entries('approval.requested')).map((e) => [e.approval, e.tool, e.deciders])).toEqual([[id, 'pay', ['u1']]]);
    expect((await h.entries('approval.decided')).map((e) => [e.approval, e.decision, e.by])).toEqual([[id, 'approved', 'u1']]);
    // The call ran under that approval (a takeover never reuses it for another call).
    expect((await h.entries('tool.started')).map((e) => [e.tool, e.approval])).toEqual([['pay', id]]);
  });

  it('does not run a denied call, and tells the model who denied it', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 5 } }] }, { text: 'Not paid.' }]);
    const h = await start({ tools: { pay: 'require_approval' }, approvers: ['boss'] }, [pay.tool]);
    const r = (await h.ingest('pay 5')) as { runId: string };
    const id = await approvalId(h);
    // A configured approver may decide too.
    expect((await approvalCommand(h, 'denied', id, source(h, 'boss', 'Boss'))).reply).toBe('Denied: pay will not run.');
    await h.runEnded(r.runId);
    expect(pay.runs).toEqual([]);
    expect(lastToolResult(1)).toEqual({ error: { tool: 'pay', category: 'denied', message: 'Boss denied the call; it was not run' } });
  });

  it('denies a call nobody decides within the timeout, and tells the model', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 7 } }] }, { text: 'Nobody approved.' }]);
    const h = await start({ tools: { pay: 'require_approval' }, approvalTimeoutMs: 1000 }, [pay.tool]);
    const r = (await h.ingest('pay 7')) as { runId: string };
    const id = await approvalId(h);
    await h.runEnded(r.runId);
    expect(pay.runs).toEqual([]);
    expect(lastToolResult(1)).toMatchObject({ error: { tool: 'pay', category: 'approval_timeout' } });
    expect((await h.entries('approval.decided')).map((e) => e.decision)).toEqual(['timeout']);
    // A click after the timeout changes nothing.
    expect((await approvalCommand(h, 'approved', id, source(h))).reply).toContain('Already decided: timed out');
  });

  it('waits without polling: the request is read again only when the record moves or the wait times out', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 3 } }] }, { text: 'Nobody approved.' }]);
    const h = await start({ tools: { pay: 'require_approval' }, approvalTimeoutMs: 2000 }, [pay.tool]);
    // The reads of this conversation's approvals the runner sends during the wait.
    const approvals = conversationKeys(h.prefix, CID).approvals;
    const client = h.ctx.redis as Redis;
    const send = client.sendCommand.bind(client);
    let reads = 0;
    client.sendCommand = ((command: Command, stream?: unknown) => {
      if (command.name === 'hget' && String(command.args[0]) === approvals) reads++;
      return send(command, stream as never);
    }) as typeof client.sendCommand;
    try {
      const r = (await h.ingest('pay 3')) as { runId: string };
      await approvalId(h);
      await h.runEnded(r.runId);
    } finally {
      client.sendCommand = send;
    }
    expect((await h.entries('approval.decided')).map((e) => e.decision)).toEqual(['timeout']);
    // Once when the wait starts and once at the timeout (a record entry in between may add one); a 200 ms poll made ten.
    expect(reads).toBeGreaterThanOrEqual(2);
    expect(reads).toBeLessThanOrEqual(3);
  });

  it('refuses a click past the deadline (the timeout is recorded), whatever the runner has seen yet', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 4 } }] }, { text: 'Too late.' }]);
    const h = await start({ tools: { pay: 'require_approval' }, approvalTimeoutMs: 600_000 }, [pay.tool]);
    const r = (await h.ingest('pay 4')) as { runId: string };
    const id = await approvalId(h);
    // The deadline has passed by the host's clock (a runner's clock behind, or no runner attached to record it).
    const key = conversationKeys(h.prefix, CID).approvals;
    const record = JSON.parse((await h.ctx.redis.hget(key, id))!);
    await h.ctx.redis.hset(key, id, JSON.stringify({ ...record, expiresAt: Date.now() - 1 }));
    expect((await approvalCommand(h, 'approved', id, source(h))).reply).toContain('Already decided: timed out');
    await h.runEnded(r.runId);
    expect(pay.runs).toEqual([]);
    expect(lastToolResult(1)).toMatchObject({ error: { tool: 'pay', category: 'approval_timeout' } });
    expect((await h.entries('approval.decided')).map((e) => [e.decision, e.by])).toEqual([['timeout', undefined]]);
  });

  it('a redelivered /approve is silent and decides nothing again; its update is remembered in the same step as the decision', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 6 } }] }, { text: 'Paid 6.' }]);
    const h = await start({ tools: { pay: 'require_approval' } }, [pay.tool]);
    const r = (await h.ingest('pay 6')) as { runId: string };
    const id = await approvalId(h);
    const click = source(h);
    expect(await approvalCommand(h, 'approved', id, click)).toMatchObject({ reply: 'Approved: pay will run.', duplicate: false });
    expect(await h.ctx.redis.get(conversationKeys(h.prefix, CID).dedupe(click.updateKey))).toBe('0');
    expect(await approvalCommand(h, 'denied', id, click)).toEqual({ reply: '', duplicate: true });
    await h.runEnded(r.runId);
    expect(pay.runs).toEqual([6]);
    expect((await h.entries('approval.decided')).map((e) => e.decision)).toEqual(['approved']);
  });

  it('/stop ends the wait without running the tool', async () => {
    const pay = payTool();
    t.fake.script([{ toolCalls: [{ id: 'call_pay', name: 'pay', args: { amount: 9 } }] }]);
    const h = await start({ tools: { pay: 'require_approval' } }, [pay.tool]);
    const r = (await h.ingest('pay 9')) as { runId: string };
    await approvalId(h);
    await h.dispatch.requestStop(h.source(), 'stop');
    const ended = await h.runEnded(r.runId);
    expect(ended.outcome).toBe('stopped');
    expect(pay.runs).toEqual([]);
  });

  it('does not offer a denied tool to the model', async () => {
    t.fake.script([{ text: 'ok' }]);
    const h = await start({ default: 'deny', tools: { lookup: 'allow' } }, [payTool().tool, lookup]);
    const r = (await h.ingest('hi')) as { runId: string };
    await h.runEnded(r.runId);
    expect(t.fake.requests[0]!.body.tools.map((x: { function: { name: string } }) => x.function.name)).toEqual(['lookup']);
  });

  it('answers a malformed or unknown approval id without writing anything', async () => {
    t.fake.script([{ text: 'ok' }]);
    const h = await start({}, []);
    expect((await approvalCommand(h, 'approved', 'nope', source(h))).reply).toContain('Usage: /approve');
    expect((await approvalCommand(h, 'approved', 'ap_000000000000000000000000', source(h))).reply).toContain('No approval request');
    await waitFor(async () => (await h.record()).length === 0 || undefined);
  });
});

describe('ToolPolicy', () => {
  const policy = new ToolPolicy({
    default: 'allow',
    tools: { pay: 'require_approval', 'crm__*': 'deny', crm__lookup: 'allow' },
    channels: { discord: { default: 'deny', tools: { pay: 'deny' } }, 'webhook:crm': { tools: { 'crm__*': 'allow' } } },
    conversations: { 'telegram:42': { tools: { pay: 'allow' } }, 'discord:7': { default: 'allow' } },
  });
  it('resolves tool entries before defaults, the more specific scope first', () => {
    expect(policy.mode('pay', 'telegram:1')).toBe('require_approval');
    expect(policy.mode('pay', 'telegram:42')).toBe('allow');
    expect(policy.mode('pay', 'discord:1')).toBe('deny');
    expect(policy.mode('search', 'discord:1')).toBe('deny');
    // A conversation's default does not beat an explicit tool entry elsewhere.
    expect(policy.mode('pay', 'discord:7')).toBe('deny');
    expect(policy.mode('search', 'discord:7')).toBe('allow');
    expect(policy.mode('crm__delete', 'telegram:1')).toBe('deny');
    expect(policy.mode('crm__lookup', 'telegram:1')).toBe('allow');
    expect(policy.mode('crm__delete', 'webhook:crm:u9')).toBe('allow');
    expect(new ToolPolicy().mode('anything', 'telegram:1')).toBe('allow');
  });
  it("gives a tool's own default (an MCP tool's) way to an entry naming the tool, and to a scope default only when stricter", () => {
    const p = new ToolPolicy({ default: 'allow', tools: { fx__lookup: 'allow' }, channels: { discord: { default: 'deny' } } });
    // A catch-all allow does not open a tool that needs approval by its own default.
    expect(p.mode('fx__delete', 'telegram:1', 'require_approval')).toBe('require_approval');
    expect(p.mode('fx__lookup', 'telegram:1', 'require_approval')).toBe('allow');
    expect(p.mode('fx__delete', 'discord:1', 'require_approval')).toBe('deny');
    expect(new ToolPolicy({ default: 'require_approval' }).mode('fx__read', 'telegram:1', 'allow')).toBe('require_approval');
    expect(new ToolPolicy().mode('fx__write', 'telegram:1', 'require_approval')).toBe('require_approval');
    expect(new ToolPolicy().mode('fx__write', 'telegram:1', 'deny')).toBe('deny');
  });
  it('says in the approval request of a destructive tool that it may delete data, and only then', () => {
    expect(policy.approvalText('fx__remove', { id: 'r1' }, { destructive: true })).toMatch(
      /`fx__remove`.*\n.*marked destructive: it may delete or overwrite data/s,
    );
    expect(policy.approvalText('fx__remove', { id: 'r1' })).not.toContain('destructive');
  });
  it('finds the channel of a conversation id', () => {
    expect(channelOf('telegram:42:7')).toBe('telegram');
    expect(channelOf('webhook:crm:u1')).toBe('webhook:crm');
  });
  it('shows bounded arguments with secret-looking names and values redacted', () => {
    const text = policy.approvalText('pay', { amount: 3, apiKey: 'abc', note: 'Bearer abcdefghijklmnop', long: 'x'.repeat(2000) });
    expect(text).toContain('"apiKey":"[redacted]"');
    expect(text).not.toContain('abcdefghijklmnop');
    expect(text.length).toBeLessThan(700);
  });
});
