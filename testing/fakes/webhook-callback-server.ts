/**
 * A local receiver of webhook-channel callbacks: records every POST, checks
 * its signature, and can be told to fail the next requests (to test retries).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkSignature } from '../../plugins/webhook/signature.js';

/** One callback received. */
export interface ReceivedCallback {
  body: {
    conversation: string;
    text: string;
    messageId: string;
    inReplyTo?: string;
    actions?: Array<{ label: string; command: string }>;
    file?: { name: string; mimeType: string; size: number; url: string; expiresAt: string; voice?: true };
  };
  headers: Record<string, string | string[] | undefined>;
  /** The signature checked out with the server's secret (within 5 minutes). */
  signed: boolean;
  /** What the server answered. */
  status: number;
}

export interface CallbackServer {
  url: string;
  /** Every request, answered ones and failed ones. */
  requests: ReceivedCallback[];
  /** Requests whose body has arrived, answered or not yet (a `delay` holds the answer). */
  received(): number;
  /** TCP connections clients opened to the server so far (1 for any number of requests on one kept-alive connection). */
  connections(): number;
  /** Accepted (2xx) callbacks. */
  accepted(): ReceivedCallback[];
  /** Texts accepted for `conversation`, in order. */
  texts(conversation: string): string[];
  /** Answers the next requests with these statuses (then 200). A `retryAfter` adds a Retry-After header (seconds). */
  failNext(...answers: Array<{ status: number; retryAfter?: number }>): void;
  /** Drops the failures still queued by `failNext`: from now on every request is answered 200. */
  clearFailures(): void;
  /** Answers every request `ms` late (a slow receiver). */
  delay(ms: number): void;
  /** Holds the answers of requests arriving from now on until the returned function is called. */
  hold(): () => void;
  /** Resolves once `n` callbacks were accepted; rejects after `timeoutMs`. */
  waitForAccepted(n: number, timeoutMs?: number): Promise<ReceivedCallback[]>;
  close(): Promise<void>;
}

export async function startCallbackServer(secret: string): Promise<CallbackServer> {
  const requests: ReceivedCallback[] = [];
  const failures: Array<{ status: number; retryAfter?: number }> = [];
  let waiters: Array<() => void> = [];
  let delayMs = 0;
  let received = 0;
  let gate: Promise<void> | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      received++;
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      if (gate) await gate;
      const raw = Buffer.concat(chunks);
      let body: ReceivedCallback['body'];
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        // A request cut off on the way (its sender stopped mid-body): not a callback, and not recorded.
        res.writeHead(400).end();
        return;
      }
      const fail = failures.shift();
      const status = fail?.status ?? 200;
      requests.push({
        body,
        headers: req.headers,
        signed: checkSignature(secret, req.headers, raw, Math.floor(Date.now() / 1000), 300) === undefined,
        status,
      });
      res.writeHead(status, { 'content-type': 'application/json', ...(fail?.retryAfter !== undefined && { 'retry-after': String(fail.retryAfter) }) });
      res.end(JSON.stringify({ ok: status < 300 }));
      const ws = waiters;
      waiters = [];
      for (const w of ws) w();
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const accepted = () => requests.filter((r) => r.status < 300);
  return {
    url: `http://127.0.0.1:${port}/callback`,
    requests,
    received: () => received,
    connections: () => connections,
    accepted,
    texts: (conversation) =>
      accepted()
        .filter((r) => r.body.conversation === conversation)
        .map((r) => r.body.text),
    failNext: (...answers) => void failures.push(...answers),
    clearFailures: () => void failures.splice(0),
    delay: (ms) => void (delayMs = ms),
    hold() {
      let release!: () => void;
      gate = new Promise<void>((r) => (release = r));
      return () => {
        gate = undefined;
        release();
      };
    },
    async waitForAccepted(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (accepted().length < n) {
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(`expected ${n} accepted callbacks within ${timeoutMs} ms, got ${JSON.stringify(accepted().map((r) => r.body.text.slice(0, 40)))}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      return accepted();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
