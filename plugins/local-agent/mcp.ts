/**
 * MCP servers as tools of the local agent. Each configured server (a stdio
 * command or a Streamable HTTP URL) gets one client shared by every run of
 * the runner; its tools join the run's tool set, named `<server>__<tool>`.
 * A server that cannot be reached leaves its tools out of that run (logged
 * and counted), never fails the run; a dropped connection is re-established
 * by the next run that needs it. A tool the server does not annotate
 * `readOnlyHint: true` needs approval unless the server's `defaultPolicy` or
 * a `toolPolicy` entry says otherwise. What a server returns (results and
 * errors) is external text: it reaches the model escaped inside an
 * `<external-content>` frame (`external-content.ts`), unless the server is
 * configured `trusted`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { jsonSchema } from 'ai';
import type { Logger } from 'pino';
import { pluginMetrics, redactSecrets } from 'steerbot/plugin';
import type { z } from 'zod';
import { externalContent } from './external-content.js';
import { type McpServerConfig, McpToolError, mcpToolName } from './mcp-config.js';
import type { ToolMode } from './policy.js';
import { MAX_TOOL_ERROR_CHARS, ToolFailure } from './tool-errors.js';
import type { AgentTool } from './tools.js';

/** One MCP tool as the server lists it. */
interface ListedTool {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
  annotations?: { idempotentHint?: boolean | undefined; readOnlyHint?: boolean | undefined; destructiveHint?: boolean | undefined } | undefined;
}

/** Shape of a `tools/call` result the agent reads. */
interface CallResult {
  content?: Array<{ type: string; text?: string; mimeType?: string; uri?: string; resource?: { uri?: string; text?: string } }>;
  structuredContent?: unknown;
  isError?: boolean;
}

/** A result's content as text: text parts and embedded resources' text, joined; any other part (an image, a link) by a placeholder. */
function contentText(r: CallResult): string {
  const parts = (r.content ?? []).map((c) => {
    if (c.type === 'text') return c.text ?? '';
    if (c.type === 'resource') return c.resource?.text ?? `[resource ${c.resource?.uri ?? ''}]`;
    return `[${c.type}${c.mimeType ? ` ${c.mimeType}` : ''}${c.uri ? ` ${c.uri}` : ''}]`;
  });
  return parts.join('\n');
}

/**
 * What the model gets from a successful result: its structured content when given, else its text. From a server
 * that is not trusted, one frame holding either (structured content as JSON, `format="json"`), escaped.
 */
function resultValue(server: string, cfg: McpServerConfig, r: CallResult): unknown {
  const structured = r.structuredContent !== undefined;
  if (cfg.trusted) return structured ? r.structuredContent : contentText(r);
  const body = structured ? JSON.stringify(r.structuredContent) : contentText(r);
  return externalContent({ server, format: structured ? 'json' : undefined }, body, { source: 'mcp' }).content;
}

/**
 * A server's error text (an `isError` result, a protocol error) as the model reads it: secrets removed, then framed
 * unless the server is trusted; whole within the tool error envelope's limit either way.
 */
function errorMessage(server: string, cfg: McpServerConfig, text: string): string {
  const clean = redactSecrets(text);
  if (cfg.trusted) return clean.slice(0, MAX_TOOL_ERROR_CHARS);
  return externalContent({ server }, clean, { source: 'mcp', maxChars: MAX_TOOL_ERROR_CHARS }).content;
}

/**
 * The mode of an MCP tool no `toolPolicy` entry names: the server's
 * `defaultPolicy`, else `allow` only for a tool the server says is read-only
 * (a tool without annotations may write: MCP assumes so too).
 */
function defaultModeOf(cfg: McpServerConfig, t: ListedTool): ToolMode {
  return cfg.defaultPolicy ?? (t.annotations?.readOnlyHint === true ? 'allow' : 'require_approval');
}

/** Safe description of a connection failure: no headers, env or URL credentials. */
function describeError(err: unknown): string {
  const msg = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return redactSecrets(msg).slice(0, 300);
}

type ServerState =
  | { kind: 'idle' }
  | { kind: 'connecting'; ready: Promise<Connected | undefined> }
  | ({ kind: 'connected' } & Connected)
  | { kind: 'down'; retryAt: number; failures: number };

interface Connected {
  client: Client;
  /** The server's tools as the agent calls them (allow-list applied), built once per connection, not per run. */
  tools: AgentTool[];
}

/** Runs that went without a server's tools (`steerbot_local_agent_mcp_unavailable_total`). */
const mcpUnavailable = pluginMetrics('local-agent').counter(
  'mcp_unavailable_total',
  "Runs that went without an MCP server's tools because it could not be reached, by server.",
  ['server'],
);

/** Counts of what the MCP connections did, for metrics and tests. */
export interface McpStats {
  /** Successful connections (first ones and re-established ones). */
  connects: number;
  /** Runs that went without a server's tools because it could not be reached. */
  unavailable: number;
}

/** Options of the MCP connections. */
export interface McpManagerOptions {
  /** Process logger (server names and failures only: never env, headers or URL credentials). */
  logger: Logger;
  /** After a failed connection, the next attempt waits this long (doubling per failure, at most 30 s), in ms. Default 1000. */
  retryDelayMs?: number;
  /** Clock, for tests. */
  now?: () => number;
}

/**
 * The MCP clients of one runner: connected on first use, shared by its runs,
 * reconnected after a drop. `tools()` never throws.
 */
export class McpManager {
  private readonly states = new Map<string, ServerState>();
  readonly stats: McpStats = { connects: 0, unavailable: 0 };
  private closed = false;

  constructor(
    private readonly servers: Record<string, McpServerConfig>,
    private readonly o: McpManagerOptions,
  ) {
    for (const name of Object.keys(servers)) this.states.set(name, { kind: 'idle' });
  }

  /** Names of the configured servers. */
  get serverNames(): string[] {
    return Object.keys(this.servers);
  }

  /** The tools of every reachable server (allow-lists applied); servers that cannot be reached are logged and left out. */
  async tools(logger: Logger = this.o.logger): Promise<AgentTool[]> {
    const lists = await Promise.all(
      Object.entries(this.servers).map(async ([name, cfg]) => {
        const conn = await this.connection(name, cfg);
        if (!conn) {
          this.stats.unavailable++;
          mcpUnavailable.inc({ server: name });
          logger.warn({ mcpServer: name }, 'MCP server unavailable; its tools are left out of this run');
          return [];
        }
        return conn.tools;
      }),
    );
    return lists.flat();
  }

  /** Closes every connection (stdio servers are stopped). */
  async close(): Promise<void> {
    this.closed = true;
    const clients: Client[] = [];
    for (const [name, s] of this.states) {
      if (s.kind === 'connected') clients.push(s.client);
      this.states.set(name, { kind: 'idle' });
    }
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  }

  /** Forgets `client` if it is still the server's connection (it dropped), closing it. */
  private forget(name: string, client: Client): void {
    const cur = this.states.get(name);
    if (cur?.kind === 'connected' && cur.client === client) this.states.set(name, { kind: 'idle' });
    delete client.onclose;
    void client.close().catch(() => undefined);
  }

  private async connection(name: string, cfg: McpServerConfig): Promise<Connected | undefined> {
    if (this.closed) return undefined;
    const s = this.states.get(name) ?? { kind: 'idle' };
    if (s.kind === 'connected') return s;
    if (s.kind === 'connecting') return s.ready;
    const now = (this.o.now ?? Date.now)();
    if (s.kind === 'down' && now < s.retryAt) return undefined;
    const failures = s.kind === 'down' ? s.failures : 0;
    const ready = this.connect(name, cfg).then(
      (c) => {
        this.states.set(name, { kind: 'connected', ...c });
        this.stats.connects++;
        this.o.logger.info({ mcpServer: name, tools: c.tools.length }, 'MCP server connected');
        return c;
      },
      (err: unknown) => {
        const delay = Math.min(30_000, (this.o.retryDelayMs ?? 1000) * 2 ** failures);
        this.states.set(name, { kind: 'down', retryAt: (this.o.now ?? Date.now)() + delay, failures: failures + 1 });
        this.o.logger.warn({ mcpServer: name, error: describeError(err), retryInMs: delay }, 'MCP server connection failed');
        return undefined;
      },
    );
    this.states.set(name, { kind: 'connecting', ready });
    return ready;
  }

  private async connect(name: string, cfg: McpServerConfig): Promise<Connected> {
    const transport = this.transport(name, cfg);
    const client = new Client({ name: 'steerbot', version: '0.1.0' });
    const dropped = () => {
      const cur = this.states.get(name);
      // Only the connection that dropped is forgotten; the next run connects again.
      if (cur?.kind === 'connected' && cur.client === client) {
        this.states.set(name, { kind: 'idle' });
        if (!this.closed) this.o.logger.warn({ mcpServer: name }, 'MCP connection dropped; the next run reconnects');
      }
    };
    client.onclose = dropped;
    client.onerror = (err) => this.o.logger.debug({ mcpServer: name, error: describeError(err) }, 'MCP transport error');
    const signal = AbortSignal.timeout(cfg.connectTimeoutMs);
    try {
      await client.connect(transport, { signal, timeout: cfg.connectTimeoutMs });
      const tools: ListedTool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { signal, timeout: cfg.connectTimeoutMs });
        tools.push(...(page.tools as ListedTool[]));
        cursor = page.nextCursor;
      } while (cursor);
      const allowed = cfg.tools ? new Set(cfg.tools) : undefined;
      return { client, tools: tools.filter((t) => !allowed || allowed.has(t.name)).map((t) => this.agentTool(name, cfg, t)) };
    } catch (err) {
      delete client.onclose;
      await client.close().catch(() => undefined);
      throw err;
    }
  }

  private transport(name: string, cfg: McpServerConfig): Transport {
    if ('command' in cfg) {
      const t = new StdioClientTransport({
        command: cfg.command,
        args: cfg.args,
        env: { ...getDefaultEnvironment(), ...cfg.env },
        ...(cfg.cwd !== undefined && { cwd: cfg.cwd }),
        stderr: 'pipe',
      });
      // A server's own diagnostics, at debug level and bounded (they are its output, not ours to trust).
      t.stderr?.on('data', (chunk: Buffer) =>
        this.o.logger.debug({ mcpServer: name, stderr: redactSecrets(String(chunk)).slice(0, 500) }, 'MCP server stderr'),
      );
      return t;
    }
    return new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers: cfg.headers } });
  }

  private agentTool(server: string, cfg: McpServerConfig, t: ListedTool): AgentTool {
    return {
      name: mcpToolName(server, t.name),
      description: (t.description ?? `Tool ${t.name} of MCP server ${server}.`).slice(0, 2000),
      inputSchema: jsonSchema({ type: 'object', properties: {}, ...t.inputSchema } as Parameters<typeof jsonSchema>[0]) as unknown as z.ZodType<unknown>,
      timeoutMs: cfg.timeoutMs,
      ...(t.annotations?.idempotentHint === true || t.annotations?.readOnlyHint === true ? { idempotent: true } : {}),
      defaultMode: defaultModeOf(cfg, t),
      // Only when the server says so: MCP's own default (a non-read-only tool may be destructive) would put the warning on every tool.
      ...(t.annotations?.destructiveHint === true && t.annotations.readOnlyHint !== true && { destructive: true }),
      execute: async (input, { signal }) => {
        const conn = await this.connection(server, cfg);
        if (!conn) throw new Error(`MCP server ${server} is unavailable`);
        let r: CallResult;
        try {
          r = (await conn.client.callTool({ name: t.name, arguments: (input ?? {}) as Record<string, unknown> }, undefined, {
            signal,
            timeout: cfg.timeoutMs,
          })) as CallResult;
        } catch (err) {
          if (signal.aborted) throw err;
          if (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed && err.code !== ErrorCode.RequestTimeout) {
            // The server answered with a protocol error (unknown tool, bad arguments): its message is for the model.
            throw new McpToolError(errorMessage(server, cfg, err.message));
          }
          // No answer: the connection is gone; the next run connects again.
          this.forget(server, conn.client);
          this.o.logger.warn({ mcpServer: server, error: describeError(err) }, 'MCP call failed without an answer; reconnecting on the next run');
          throw new ToolFailure('unavailable', `MCP server ${server} did not answer`);
        }
        if (r.isError) {
          const text = contentText(r);
          throw new McpToolError(text ? errorMessage(server, cfg, text) : 'the tool reported an error');
        }
        return resultValue(server, cfg, r);
      },
    };
  }
}
