/**
 * What the fakes of model APIs (anthropic-server.ts, google-server.ts) share:
 * an HTTP server on 127.0.0.1 that records every request, answers each with
 * the next scripted turn, and lets a test wait for requests to arrive.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readText } from './http-io.js';

/** One request a model fake received. */
export interface ModelRequest {
  /** The request path, query included (`/v1/messages`, `/v1beta/models/m:streamGenerateContent?alt=sse`). */
  path: string;
  /** The parsed JSON body. */
  body: any;
  /** The request headers, as node:http reports them (lower-case names). */
  headers: IncomingHttpHeaders;
}

/** A running model fake answering scripted turns of type `T`. */
export interface ScriptedModelServer<T> {
  /** Base URL to give the provider (`baseURL`). */
  url: string;
  /** Every model request received, in arrival order. */
  requests: ModelRequest[];
  /**
   * Sets what the model answers. A list is consumed one turn per request from
   * the time it is set; a function is called with the request and its index
   * in `requests`. When the list runs out the answer is text `ok`.
   */
  script(turns: T[] | ((req: ModelRequest, index: number) => T)): void;
  /** Resolves once at least `n` requests have arrived; rejects after `timeoutMs` (default 5000). */
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  /** Drops open connections and stops listening. */
  close(): Promise<void>;
}

/** How a fake answers: `route` says whether a request is a model call; `answer` writes the turn's answer. */
export interface ScriptedModelOptions<T> {
  /** The path prefix of the base URL (`/v1`). */
  basePath: string;
  /** The turn answered when the script has run out. */
  fallback: T;
  /** True when a POST to `path` (without the query) is a model call; anything else gets a 404. */
  route(path: string): boolean;
  /** A refusal (status and body) of the request before any turn is used (a wrong key); undefined to answer it. */
  refuse?(req: ModelRequest): { status: number; body: unknown } | undefined;
  /** Writes the answer of `turn` to `req`. */
  answer(res: ServerResponse, req: ModelRequest, turn: T, index: number): void;
}

/** Starts a scripted model fake on 127.0.0.1 with a free port. */
export async function startScriptedModel<T>(o: ScriptedModelOptions<T>): Promise<ScriptedModelServer<T>> {
  const requests: ModelRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let turns: T[] | ((req: ModelRequest, index: number) => T) = [];
  let cursor = 0;

  const server = createServer((q, res) => {
    void readText(q).then((raw) => {
      const path = q.url ?? '/';
      if (q.method !== 'POST' || !o.route(path.split('?')[0] ?? '')) return sendJson(res, 404, { error: { message: `no route ${q.method} ${path}` } });
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        return sendJson(res, 400, { error: { message: 'body is not JSON' } });
      }
      const req: ModelRequest = { path, body, headers: { ...q.headers } };
      const index = requests.push(req) - 1;
      for (const w of waiters.filter((w) => requests.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      const refused = o.refuse?.(req);
      if (refused) return sendJson(res, refused.status, refused.body);
      const turn = typeof turns === 'function' ? turns(req, index) : (turns[cursor++] ?? o.fallback);
      o.answer(res, req, turn, index);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${o.basePath}`,
    requests,
    script(next) {
      turns = next;
      cursor = 0;
    },
    waitForRequests(n, timeoutMs = 5000) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          reject(new Error(`model fake: expected ${n} requests within ${timeoutMs} ms, got ${requests.length}`));
        }, timeoutMs);
        const waiter = {
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
        waiters.push(waiter);
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** Answers `value` as JSON with `status`. */
export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** Answers an SSE stream of `events` (each a whole event, blank line included). */
export function sendEvents(res: ServerResponse, events: string[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const e of events) res.write(e);
  res.end();
}

/** Splits text into word-sized deltas, as providers stream it. */
export function textDeltas(text: string): string[] {
  return text === '' ? [] : (text.match(/\s*\S+\s*|\s+/g) ?? [text]);
}
