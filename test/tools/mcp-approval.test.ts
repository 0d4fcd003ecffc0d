/**
 * MCP tools under the tool policy, end to end: a real MCP server (stdio,
 * written with the SDK, its tools annotated) → host ingest → Redis → runner
 * → local agent on the real provider against the fake model. A tool not
 * annotated read-only waits for approval (a destructive one says so); a
 * read-only one runs; the server's `defaultPolicy` and operator entries win
 * over the annotations.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { approvalCommand } from '../../host/commands/approvals.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import type { McpServerSettings } from '../../plugins/local-agent/mcp-config.js';
import type { ToolPolicySettings } from '../../plugins/local-agent/policy.js';
import { fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';
import { mcpFrameBody } from './mcp-frame.js';

const t = perTestModel();
const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

async function start(server: Partial<McpServerSettings> = {}, policy: ToolPolicySettings = {}): Promise<RunnerHarness> {
  t.h = await RunnerHarness.start({
    plugin: createLocalAgentPlugin({
      model: fakeModel(t.fake.url),
      builtins: { currentTime: false },
      toolbox: { mcpServers: { fx: { command: process.execPath, args: [FIXTURE], tools: ['add', 'echo', 'remove'], ...server } as McpServerSettings }, policy },
    }),
  });
  return t.h;
}

/** The content of the last tool message of the `i`-th model request. */
const lastToolResult = (i: number): unknown => t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1)?.content;

describe('MCP tools under the tool policy', () => {
  it('a tool not annotated read-only waits for approval, whose request says the tool is destructive; approved, it runs once', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_rm', name: 'fx__remove', args: { id: 'r1' } }] }, { text: 'Removed r1.' }]);
    const h = await start();
    const r = (await h.ingest('remove record r1')) as { runId: string };
    const [request] = await h.outbound.waitForMessages(1);
    expect(request!.text).toContain('`fx__remove`');
    expect(request!.text).toContain('"id":"r1"');
    expect(request!.text).toContain('This tool is marked destructive: it may delete or overwrite data.');
    // Waiting: the tool has not run, so the model was not asked again.
    expect(t.fake.requests).toHaveLength(1);
    expect(await h.entries('tool.started')).toEqual([]);

    const id = /\/approve (ap_[0-9a-f]{24})/.exec(request!.text)![1]!;
    expect((await approvalCommand(h, 'approved', id, { ...h.source(), sender: { id: 'u1', name: 'Ann' } })).reply).toBe('Approved: fx__remove will run.');
    await h.runEnded(r.runId);
    expect(mcpFrameBody(lastToolResult(1), 'fx')).toBe('removed r1');
    expect(h.outbound.texts.at(-1)).toBe('Removed r1.');
    expect((await h.entries('tool.completed')).map((e) => [e.tool, e.status])).toEqual([['fx__remove', 'ok']]);
  });

  it('a read-only tool runs without asking', async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_add', name: 'fx__add', args: { a: 2, b: 3 } }] }, { text: 'It is 5.' }]);
    const h = await start();
    const r = (await h.ingest('2 + 3?')) as { runId: string };
    await h.runEnded(r.runId);
    expect(h.outbound.texts).toEqual(['It is 5.']);
    expect(JSON.parse(mcpFrameBody(lastToolResult(1), 'fx', true))).toEqual({ sum: 5 });
    expect(await h.entries('approval.requested')).toEqual([]);
  });

  it.each([
    ["the server's defaultPolicy", { defaultPolicy: 'allow' }, {}],
    ['an operator entry naming the tool', {}, { tools: { fx__echo: 'allow' } }],
    ["an operator entry for the server's prefix", { defaultPolicy: 'require_approval' }, { default: 'require_approval', tools: { 'fx__*': 'allow' } }],
  ] as const)('%s lets a tool that is not read-only run without asking', async (_, server, policy) => {
    t.fake.script([{ toolCalls: [{ id: 'call_echo', name: 'fx__echo', args: { text: 'hi' } }] }, { text: 'It said hi.' }]);
    const h = await start(server, policy);
    const r = (await h.ingest('echo hi')) as { runId: string };
    await h.runEnded(r.runId);
    expect(h.outbound.texts).toEqual(['It said hi.']);
    expect(mcpFrameBody(lastToolResult(1), 'fx')).toBe('echo: hi');
    expect(await h.entries('approval.requested')).toEqual([]);
  });

  it("a server's defaultPolicy deny keeps its tools from the model, except those an operator entry allows", async () => {
    t.fake.script([{ text: 'ok' }]);
    const h = await start({ defaultPolicy: 'deny' }, { tools: { fx__add: 'allow' } });
    const r = (await h.ingest('hi')) as { runId: string };
    await h.runEnded(r.runId);
    const names: string[] = t.fake.requests[0]!.body.tools.map((x: { function: { name: string } }) => x.function.name);
    // The server's tools only (the built-in schedule tools are offered beside them).
    expect(names.filter((n) => n.startsWith('fx__'))).toEqual(['fx__add']);
  });
});
