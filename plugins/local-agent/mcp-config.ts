/**
 * Settings of the local agent's MCP servers, and what the rest of the agent
 * needs to know of MCP without loading the SDK (`mcp.ts`, imported only when
 * servers are configured).
 */
import { z } from 'zod';
import { toolModeSchema } from './policy.js';

const names = z.array(z.string().trim().min(1).max(128)).min(1, { error: 'expected at least one tool name' });
const common = {
  tools: names.optional().describe("Allow-list of the server's tool names offered to the model. Default: all of them."),
  timeoutMs: z.number().int().min(100).max(600_000).default(30_000).describe('Time limit of one tool call, in ms. Default 30 000.'),
  connectTimeoutMs: z.number().int().min(100).max(120_000).default(10_000).describe('Time limit of connecting and listing the tools, in ms. Default 10 000.'),
  defaultPolicy: toolModeSchema
    .optional()
    .describe(
      "Mode of the server's tools that no `toolPolicy` entry names: `allow`, `require_approval` or `deny`. Default: from the tool's annotations (`readOnlyHint: true`: allow; otherwise require_approval).",
    ),
  trusted: z
    .boolean()
    .optional()
    .describe(
      "`true`: the server's results and errors reach the model as the server wrote them. Default: escaped inside an `<external-content>` block saying they are data, not instructions (a server that returns pages, mail or tickets passes on whatever text they hold).",
    ),
};

/** One MCP server: a stdio command or a Streamable HTTP endpoint. */
export const mcpServerSchema = z.union(
  [
    z.strictObject({
      command: z.string().trim().min(1).describe('Executable that serves MCP on stdin/stdout.'),
      args: z.array(z.string()).default([]).describe('Its arguments. Default `[]`.'),
      env: z
        .record(z.string(), z.string())
        .default({})
        .describe('Extra environment variables (on top of a minimal safe set: PATH, HOME, …). Values are secrets: never logged, redacted by `check-config`.'),
      cwd: z.string().min(1).optional().describe("Working directory. Default: the runner's."),
      ...common,
    }),
    z.strictObject({
      url: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL' }).describe('Streamable HTTP endpoint of the server.'),
      headers: z
        .record(z.string(), z.string())
        .default({})
        .describe('Headers sent with every request (e.g. `Authorization`). Values are secrets: never logged, redacted by `check-config`.'),
      ...common,
    }),
  ],
  { error: 'expected a stdio server ({ command, args?, env?, cwd? }) or an HTTP server ({ url, headers? })' },
);

/** Settings of one MCP server as written. */
export type McpServerSettings = z.input<typeof mcpServerSchema>;

/** Settings of one MCP server as parsed. */
export type McpServerConfig = z.output<typeof mcpServerSchema>;

/** `agents.local-agent.mcpServers`: servers by name (the name prefixes its tools). */
export const mcpServersSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, { error: 'expected a server name of 1-32 characters [A-Za-z0-9_-]' }), mcpServerSchema)
  .describe(
    'MCP servers whose tools join the agent\'s, by name: `{ "files": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"] }, "crm": { "url": "https://mcp.example.com/mcp", "headers": { "Authorization": "Bearer …" }, "tools": ["lookup"] } }`. Tools are named `<server>__<tool>`. Default `{}`.',
  );

/** An MCP tool reported a failure (`isError`) or the server a protocol error: its message (framed unless the server is trusted, within the tool error limit) is what the model sees. */
export class McpToolError extends Error {
  override readonly name = 'McpToolError';
}

/** Builds the model-facing name `<server>__<tool>` (AI SDK names: `[A-Za-z0-9_-]`, at most 64 characters). */
export function mcpToolName(server: string, tool: string): string {
  return `${server}__${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
}
