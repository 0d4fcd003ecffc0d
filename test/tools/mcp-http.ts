/**
 * A real MCP server over Streamable HTTP for the tests (stateless: one
 * server per request, as the SDK documents), with the fixture tools (or the
 * test's own) and an optional bearer token. It can be closed and started
 * again on its port.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { buildServer } from './fixtures/mcp-tools.mjs';

/** A running HTTP MCP server. */
export interface McpHttpServer {
  url: string;
  /** Authorization headers received, in order. */
  authHeaders: Array<string | undefined>;
  /** Calls of the `count` tool so far. */
  state: { calls: number };
  close(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
}

/** Starts one on 127.0.0.1 (a free port unless `port` is given), serving the tools `build` registers (default: the fixture's). */
export async function startMcpHttp(opts: { token?: string; port?: number; build?: (state: { calls: number }) => McpServer } = {}): Promise<McpHttpServer> {
  const state = { calls: 0 };
  const authHeaders: Array<string | undefined> = [];
  let server: Server | undefined;
  let port = opts.port ?? 0;
  const listen = async () => {
    server = createServer(async (req, res) => {
      authHeaders.push(req.headers.authorization);
      if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
        return;
      }
      const mcp = (opts.build ?? buildServer)(state);
      const transport = new StreamableHTTPServerTransport({});
      res.on('close', () => {
        void transport.close();
        void mcp.close();
      });
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server!.address() as AddressInfo).port;
  };
  await listen();
  return {
    get url() {
      return `http://127.0.0.1:${port}/mcp`;
    },
    authHeaders,
    state,
    close: async () => {
      server?.closeAllConnections();
      await new Promise<void>((resolve) => server?.close(() => resolve()));
    },
    restart: listen,
  };
}
