/**
 * MCP servers as tools: real servers written with `@modelcontextprotocol/sdk`
 * (a stdio child process and a Streamable HTTP server), the real client.
 */
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { McpManager } from '../../plugins/local-agent/mcp.js';
import { type McpServerSettings, McpToolError, mcpServersSchema } from '../../plugins/local-agent/mcp-config.js';
import { ToolFailure } from '../../plugins/local-agent/tool-errors.js';
import type { AgentTool } from '../../plugins/local-agent/tools.js';
import { metrics } from '../../src/telemetry/metrics.js';
import { mcpFrameBody } from './mcp-frame.js';
import { type McpHttpServer, startMcpHttp } from './mcp-http.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/mcp-server.mjs', import.meta.url));
const stdio = (extra: Partial<McpServerSettings> = {}): McpServerSettings => ({ command: process.execPath, args: [FIXTURE], ...extra }) as McpServerSettings;

/** A logger whose lines the test reads. */
function capturedLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

const managers: McpManager[] = [];
const servers: McpHttpServer[] = [];
afterEach(async () => {
  await Promise.all(managers.splice(0).map((m) => m.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function manager(config: Record<string, McpServerSettings>, logger = pino({ level: 'silent' }), retryDelayMs = 1): McpManager {
  const m = new McpManager(mcpServersSchema.parse(config), { logger, retryDelayMs });
  managers.push(m);
  return m;
}

const byName = (tools: AgentTool[], name: string): AgentTool => {
  const t = tools.find((x) => x.name === name);
  if (!t) throw new Error(`no tool ${name} among ${tools.map((x) => x.name).join(', ')}`);
  return t;
};
const call = (t: AgentTool, input: unknown) => t.execute(input, { signal: new AbortController().signal });

describe('MCP servers as tools', () => {
  describe('over stdio', () => {
    it("offers the server's tools as <server>__<tool> and calls them", async () => {
      const m = manager({ local: stdio() });
      const tools = await m.tools();
      expect(tools.map((t) => t.name).sort()).toEqual([
        'local__add',
        'local__big',
        'local__count',
        'local__echo',
        'local__env',
        'local__exit',
        'local__fail',
        'local__remove',
      ]);
      // What the server returns is framed as external content (security/mcp-results.test.ts attacks it).
      expect(mcpFrameBody(await call(byName(tools, 'local__echo'), { text: 'hi' }), 'local')).toBe('echo: hi');
      // Structured content when the tool gives it, as JSON; read-only tools count as idempotent.
      expect(JSON.parse(mcpFrameBody(await call(byName(tools, 'local__add'), { a: 2, b: 40 }), 'local', true))).toEqual({ sum: 42 });
      expect(byName(tools, 'local__add').idempotent).toBe(true);
      expect(byName(tools, 'local__echo').idempotent).toBeUndefined();
    });

    it('needs approval for tools not annotated read-only and marks destructive ones, unless the server has a defaultPolicy', async () => {
      const m = manager({ local: stdio({ tools: ['add', 'echo', 'remove'] }), open: stdio({ tools: ['echo', 'remove'], defaultPolicy: 'allow' }) });
      const tools = await m.tools();
      const modes = Object.fromEntries(tools.map((t) => [t.name, [t.defaultMode, t.destructive === true]]));
      expect(modes).toEqual({
        // readOnlyHint: true
        local__add: ['allow', false],
        // no annotations: MCP assumes a tool may write
        local__echo: ['require_approval', false],
        // readOnlyHint: false, destructiveHint: true
        local__remove: ['require_approval', true],
        open__echo: ['allow', false],
        open__remove: ['allow', true],
      });
    });

    it("filters the tools by the server's allow-list", async () => {
      const m = manager({ local: stdio({ tools: ['echo', 'add'] }) });
      expect((await m.tools()).map((t) => t.name).sort()).toEqual(['local__add', 'local__echo']);
    });

    it('passes env and cwd to the server process', async () => {
      const m = manager({ local: stdio({ env: { FIXTURE_TOKEN: 'tok-123' }, cwd: '/tmp' }) });
      const out = JSON.parse(mcpFrameBody(await call(byName(await m.tools(), 'local__env'), {}), 'local'));
      expect(out).toMatchObject({ token: 'tok-123', cwd: '/tmp' });
    });

    it("turns a tool error (isError) into a McpToolError carrying the tool's message, framed unless the server is trusted", async () => {
      const m = manager({ local: stdio(), mine: stdio({ trusted: true }) });
      const tools = await m.tools();
      const err = await call(byName(tools, 'local__fail'), {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpToolError);
      expect(mcpFrameBody((err as Error).message, 'local')).toBe('no such record');
      const trusted = await call(byName(tools, 'mine__fail'), {}).catch((e: unknown) => e);
      expect(trusted).toBeInstanceOf(McpToolError);
      expect((trusted as Error).message).toBe('no such record');
    });

    it('shares one connection between runs and re-establishes it after the server process exits', async () => {
      const m = manager({ local: stdio() });
      const first = await m.tools();
      const pid1 = JSON.parse(mcpFrameBody(await call(byName(first, 'local__env'), {}), 'local')).pid as number;
      await m.tools();
      expect(m.stats.connects).toBe(1);
      // The server goes away (the tool makes its process exit): the next run connects again.
      await call(byName(first, 'local__exit'), {});
      await waitUntil(async () => {
        const tools = await m.tools();
        return m.stats.connects === 2 && tools.length === 8;
      });
      const pid2 = JSON.parse(mcpFrameBody(await call(byName(await m.tools(), 'local__env'), {}), 'local')).pid as number;
      expect(pid2).not.toBe(pid1);
      expect(m.stats.connects).toBe(2);
    });

    it('leaves out the tools of a server that cannot start, without failing, and logs it', async () => {
      const { logger, lines } = capturedLogger();
      const m = manager({ broken: { command: '/nonexistent/mcp-server', env: { SECRET_ENV: 'env-secret-value' } }, local: stdio({ tools: ['echo'] }) }, logger);
      const tools = await m.tools(logger);
      expect(tools.map((t) => t.name)).toEqual(['local__echo']);
      expect(m.stats.unavailable).toBe(1);
      expect(await metrics.registry.getSingleMetricAsString('steerbot_local_agent_mcp_unavailable_total')).toMatch(
        /steerbot_local_agent_mcp_unavailable_total\{server="broken"\} [1-9]/,
      );
      expect(lines.join('')).toContain('MCP server unavailable');
      expect(lines.join('')).not.toContain('env-secret-value');
    });
  });

  describe('over Streamable HTTP', () => {
    it('lists and calls tools, sending the configured headers, which never reach the logs', async () => {
      const server = await startMcpHttp({ token: 'http-secret-token' });
      servers.push(server);
      const { logger, lines } = capturedLogger();
      const m = manager({ remote: { url: server.url, headers: { Authorization: 'Bearer http-secret-token' }, tools: ['add', 'count'] } }, logger);
      const tools = await m.tools(logger);
      expect(tools.map((t) => t.name).sort()).toEqual(['remote__add', 'remote__count']);
      expect(JSON.parse(mcpFrameBody(await call(byName(tools, 'remote__add'), { a: 1, b: 2 }), 'remote', true))).toEqual({ sum: 3 });
      expect(server.authHeaders.length).toBeGreaterThan(0);
      expect(server.authHeaders.every((h) => h === 'Bearer http-secret-token')).toBe(true);
      expect(lines.join('')).toContain('MCP server connected');
      expect(lines.join('')).not.toContain('http-secret-token');
    });

    it('refuses a bad token: the server is unavailable for the run, the run goes on', async () => {
      const server = await startMcpHttp({ token: 'right' });
      servers.push(server);
      const m = manager({ remote: { url: server.url, headers: { Authorization: 'Bearer wrong' } } });
      expect(await m.tools()).toEqual([]);
      expect(m.stats.unavailable).toBe(1);
    });

    it('a server that goes down fails the call as unavailable; once it is back, a later run reconnects', async () => {
      const server = await startMcpHttp();
      servers.push(server);
      const m = manager({ remote: { url: server.url } });
      const tools = await m.tools();
      expect(mcpFrameBody(await call(byName(tools, 'remote__count'), {}), 'remote')).toBe('1');
      await server.close();
      const err = await call(byName(tools, 'remote__count'), {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ToolFailure);
      expect((err as ToolFailure).category).toBe('unavailable');
      // Down: the run after goes without the server's tools.
      expect(await m.tools()).toEqual([]);
      await server.restart();
      const back = await waitUntil(async () => {
        const t = await m.tools();
        return t.length > 0 && t;
      });
      expect(mcpFrameBody(await call(byName(back, 'remote__count'), {}), 'remote')).toBe('2');
      expect(m.stats.connects).toBe(2);
    });
  });
});

/** Polls `check` until it returns a truthy value (deadline 10 s). */
async function waitUntil<T>(check: () => Promise<T | false>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await new Promise((r) => setTimeout(r, 20));
  }
}
