/**
 * The built-in `http_fetch` tool: HTTP GET with bounded size and time,
 * through the guarded fetch (`src/http/guarded-fetch.ts`): loopback, private,
 * link-local, metadata and other non-public addresses are refused unless
 * allow-listed, after DNS resolution and on every redirect.
 */

import { type FetchRefusal, FetchRefusedError, guardedFetch, type ResolveHost } from 'steerbot/plugin';
import { z } from 'zod';
import { ToolFailure, type ToolFailureCategory } from './tool-errors.js';
import type { AgentTool } from './tools.js';

/** Options of the HTTP fetch tool. */
export interface HttpFetchToolOptions {
  /** Largest response body returned to the model, in characters. Default 20000. */
  maxChars?: number;
  /** Largest response body read, in bytes (the rest is not downloaded). Default 1 MiB. */
  maxBytes?: number;
  /** Time limit of the whole fetch (redirects included), in ms. Default 15000. */
  timeoutMs?: number;
  /** Most redirects followed. Default 5. */
  maxRedirects?: number;
  /**
   * Hosts and addresses allowed even when they are not public: host names
   * (`intranet.example.com`), IP addresses, or CIDR ranges (`10.1.0.0/16`).
   * Default none.
   */
  allow?: string[];
  /** DNS resolution (injectable for tests). Default `node:dns` lookup of all addresses. */
  resolve?: ResolveHost;
}

/** How the model hears of each refusal. */
const CATEGORY: Record<FetchRefusal, ToolFailureCategory> = {
  url: 'forbidden',
  host: 'forbidden',
  address: 'forbidden',
  redirects: 'too_many_redirects',
  too_large: 'tool_error',
  timeout: 'timeout',
};

const inputSchema = z.object({
  url: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//i.test(u), 'http(s) URLs only'),
});

/** Fetches a URL with GET (built in, off by default: it lets the model reach the network). */
export function httpFetchTool(o: HttpFetchToolOptions = {}): AgentTool<{ url: string }> {
  const maxChars = o.maxChars ?? 20_000;
  const timeoutMs = o.timeoutMs ?? 15_000;
  return {
    name: 'http_fetch',
    description: 'Fetches a web page or API with HTTP GET and returns status and body text (truncated). Only public addresses.',
    inputSchema,
    idempotent: true,
    async execute({ url }, { signal }) {
      let res: Awaited<ReturnType<typeof guardedFetch>>;
      try {
        res = await guardedFetch(url, {
          maxBytes: o.maxBytes ?? 1_048_576,
          oversize: 'truncate',
          timeoutMs,
          maxRedirects: o.maxRedirects ?? 5,
          allowPrivate: o.allow ?? [],
          headers: { 'user-agent': 'steerbot-http-fetch', accept: '*/*' },
          signal,
          label: 'http_fetch',
          ...(o.resolve && { resolve: o.resolve }),
        });
      } catch (err) {
        if (err instanceof FetchRefusedError) throw new ToolFailure(CATEGORY[err.reason], err.message);
        throw err;
      }
      const text = res.data.toString('utf8');
      const body = text.length > maxChars ? `${text.slice(0, maxChars)}…[truncated]` : res.truncated ? `${text}…[truncated]` : text;
      return { status: res.status, ...(res.redirects > 0 && { url: res.url }), body };
    },
    timeoutMs,
  };
}
