/**
 * The local agent's tools end to end: host ingest → Redis → runner → local
 * agent (real OpenAI-compatible provider against the fake model) → delivery.
 * An MCP tool in a run, a 200 KB result stored as an artifact and paged
 * through `read_artifact`, artifacts gone on reset and purge, tool failures
 * as safe envelopes, tool calls recorded as started / completed.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AgentTool, createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { CID, fakeModel, perTestModel, RunnerHarness } from '../runner/harness.js';
import { mcpFrameBody } from './mcp-frame.js';

const t = perTestModel();
const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));

/** The tool messages of the `i`-th model request, content parsed. */
const toolResults = (i: number): Array<{ tool_call_id: string; content: any }> =>
  t.fake.requests[i]!.body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { tool_call_id: string; content: string }) => ({
    tool_call_id: m.tool_call_id,
    content: JSON.parse(m.content),
  }));
// The tools offered, but for the schedule tools every conversation gets while schedules are on (the default).
const offered = (i: number): string[] =>
  (t.fake.requests[i]!.body.tools ?? [])
    .map((x: { function: { name: string } }) => x.function.name)
    .filter((name: string) => !name.startsWith('schedule_'))
    .sort();

/** A tool returning `chars` characters of numbered lines. */
function bigTool(chars: number): { tool: AgentTool; text: string } {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < chars; i++) lines.push(`row ${String(i).padStart(6, '0')} ${'0123456789'.repeat(5)}`);
  const text = lines.join('\n').slice(0, chars);
  return { text, tool: { name: 'report', description: 'a large report', inputSchema: z.object({}), execute: async () => text } };
}

describe('local agent tools end to end', () => {
  it("uses an MCP server's tool in a run, and records the call as started and completed", async () => {
    t.fake.script([{ toolCalls: [{ id: 'call_add', name: 'calc__add', args: { a: 20, b: 22 } }] }, { text: 'The sum is 42.' }]);
    t.h = await RunnerHarness.start({
      plugin: createLocalAgentPlugin({
        model: fakeModel(t.fake.url),
        builtins: { currentTime: false },
        toolbox: { mcpServers: { calc: { command: process.execPath, args: [FIXTURE], tools: ['add', 'echo'] } } },
      }),
    });
    const r = (await t.h.ingest('what is 20 + 22?')) as { runId: string };
    await t.h.outbound.waitForMessages(1);
    await t.h.runEnded(r.runId);

    expect(t.h.outbound.texts).toEqual(['The sum is 42.']);
    expect(offered(0)).toEqual(['calc__add', 'calc__echo']);
    const [result, ...others] = t.fake.requests[1]!.body.messages.filter((m: { role: string }) => m.role === 'tool');
    expect(others).toEqual([]);
    expect(result.tool_call_id).toBe('call_add');
    expect(JSON.parse(mcpFrameBody(result.content, 'calc', true))).toEqual({ sum: 42 });
    const started = await t.h.entries('tool.started');
    const completed = await t.h.entries('tool.completed');
    expect(started.map((e) => [e.call, e.tool, e.idempotent])).toEqual([['call_add', 'calc__add', true]]);
    expect(completed.map((e) => [e.call, e.status, e.output])).toEqual([['call_add', 'ok', result.content]]);
    expect(started[0]!.seq).toBeLessThan(completed[0]!.seq);
  });

  it('goes on without the tools of an MCP server that is down', async () => {
    t.fake.script([{ text: 'No calculator today.' }]);
    t.h = await RunnerHarness.start({
      plugin: createLocalAgentPlugin({
        model: fakeModel(t.fake.url),
        builtins: { currentTime: true },
        toolbox: { mcpServers: { calc: { command: '/nonexistent/mcp' } } },
      }),
    });
    const r = (await t.h.ingest('hi')) as { runId: string };
    const ended = await t.h.runEnded(r.runId);
    expect(ended.outcome).toBe('completed');
    expect(t.h.outbound.texts).toEqual(['No calculator today.']);
    expect(offered(0)).toEqual(['current_time']);
  });

  it('stores a 200 KB result as an artifact (preview + reference in the prompt) that read_artifact pages through; /new deletes it', async () => {
    const { tool, text } = bigTool(200_000);
    let artifactId = '';
    t.fake.script((body, i) => {
      if (i === 0) return { toolCalls: [{ id: 'call_report', name: 'report', args: {} }] };
      const last = JSON.parse(body.messages.at(-1).content);
      if (i === 1) {
        artifactId = last.artifact.id;
        return { toolCalls: [{ id: 'call_read1', name: 'read_artifact', args: { id: artifactId, offset: 0 } }] };
      }
      if (i === 2) return { toolCalls: [{ id: 'call_read2', name: 'read_artifact', args: { id: artifactId, offset: last.nextOffset } }] };
      return { text: 'Read it.' };
    });
    t.h = await RunnerHarness.start({
      plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [tool], builtins: { currentTime: false }, toolbox: { maxResultChars: 16_000 } }),
    });
    const r = (await t.h.ingest('summarize the report')) as { runId: string };
    await t.h.outbound.waitForMessages(1);
    await t.h.runEnded(r.runId);

    // `read_artifact` is offered from the step after the first artifact, not before.
    expect(offered(0)).toEqual(['report']);
    expect(offered(1)).toEqual(['read_artifact', 'report']);
    // The prompt got a bounded preview and the reference, not 200 KB.
    const first = t.fake.requests[1]!.body.messages.at(-1).content as string;
    expect(first.length).toBeLessThan(4000);
    const ref = JSON.parse(first);
    expect(ref.artifact).toEqual({ id: artifactId, chars: 200_000 });
    expect(ref.preview).toBe(text.slice(0, 2000));
    // Two pages, in order, each bounded.
    const page1 = toolResults(2).at(-1)!.content;
    const page2 = toolResults(3).at(-1)!.content;
    expect(page1).toMatchObject({ id: artifactId, offset: 0, chars: 200_000, text: text.slice(0, page1.nextOffset) });
    expect(page1.text.length).toBeLessThanOrEqual(16_000);
    expect(page2).toMatchObject({ offset: page1.nextOffset, text: text.slice(page1.nextOffset, page2.nextOffset) });
    // Stored under the conversation's hash tag, with a TTL.
    const key = conversationKeys(t.h.prefix, CID).artifacts;
    expect(key).toContain(`{c:${CID}}`);
    expect(await t.h.ctx.redis.hget(key, artifactId)).toBe(text);
    const ttl = await t.h.ctx.redis.ttl(key);
    expect(ttl).toBeGreaterThan(80_000);
    expect(ttl).toBeLessThanOrEqual(86_400);

    await t.h.dispatch.reset(t.h.source());
    expect(await t.h.ctx.redis.exists(key)).toBe(0);
  });

  it("purge deletes the conversation's artifacts", async () => {
    const { tool } = bigTool(50_000);
    t.fake.script([{ toolCalls: [{ id: 'c1', name: 'report', args: {} }] }, { text: 'ok' }]);
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [tool], builtins: { currentTime: false } }) });
    const r = (await t.h.ingest('report please')) as { runId: string };
    await t.h.runEnded(r.runId);
    await t.h.idle();
    const key = conversationKeys(t.h.prefix, CID).artifacts;
    expect(await t.h.ctx.redis.hlen(key)).toBe(1);
    expect((await purgeConversation(t.h.ctx.redis, t.h.prefix, CID)).kind).toBe('purged');
    expect(await t.h.ctx.redis.exists(key)).toBe(0);
  });

  it('gives the model a safe envelope for a failing tool: name, category, generic message; no internal details', async () => {
    const leaky: AgentTool = {
      name: 'db',
      description: 'queries the db',
      inputSchema: z.object({}),
      execute: async () => {
        throw new Error('connect ECONNREFUSED postgres://admin:hunter2@10.0.0.5/prod at /srv/app/db.js:42');
      },
    };
    t.fake.script([{ toolCalls: [{ id: 'call_db', name: 'db', args: {} }] }, { text: 'The database is unavailable.' }]);
    t.h = await RunnerHarness.start({ plugin: createLocalAgentPlugin({ model: fakeModel(t.fake.url), tools: [leaky], builtins: { currentTime: false } }) });
    const r = (await t.h.ingest('query it')) as { runId: string };
    await t.h.runEnded(r.runId);
    expect(toolResults(1)).toEqual([
      { tool_call_id: 'call_db', content: { error: { tool: 'db', category: 'internal', message: 'the tool failed with an internal error' } } },
    ]);
    expect(JSON.stringify(t.fake.requests[1]!.body)).not.toContain('hunter2');
    const [completed] = await t.h.entries('tool.completed');
    expect(completed).toMatchObject({ call: 'call_db', status: 'error' });
  });
});
