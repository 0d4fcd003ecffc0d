/**
 * A stranger who sends a request's body a byte at a time, to the LINE
 * webhook (or any public route of the host's server), gets nothing for it:
 * past the request timeout the server answers 408 and closes the connection,
 * so a few hundred such connections cannot hold the process's sockets and
 * their buffered bodies for ever. Only receiving the request is timed: an
 * event stream that lasts longer goes on.
 */
import { createHash } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen, routeRegistry } from '../../host/http.js';
import { registerWebhookRoute } from '../../plugins/line/webhook.js';
import { createLogger } from '../../src/logger.js';
import { waitFor } from '../../testing/wait.js';
import { heldEventStream } from '../helpers/held-stream.js';
import { redisUrl } from '../helpers/redis.js';

// `http.requestTimeoutMs` (at least a second when configured; shorter here, so the test is quick).
const config = { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 300 } };

/** Everything the server sent on `socket` once it closed the connection. */
function answerWhenClosed(socket: Socket): () => string | undefined {
  let got = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (got += d.toString('utf8')));
  socket.on('close', () => (closed = true));
  return () => (closed ? got : undefined);
}

describe('a request whose body trickles in', () => {
  let redis: Redis;
  let app: HttpServer;
  let address: URL;
  const handled: unknown[] = [];
  const events = heldEventStream();

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    app = createHttpServer({ config, redis, logger: createLogger({ level: 'silent' }) });
    const routes = routeRegistry(app);
    registerWebhookRoute(routes, {
      path: '/line/webhook',
      channelSecret: createHash('sha256').update('line secret').digest('hex'),
      handle: async (payload) => {
        handled.push(payload);
        return {};
      },
    });
    routes.add(events.route);
    address = new URL(await listen(app, { host: '127.0.0.1', port: 0 }));
  });
  afterAll(async () => {
    events.release();
    await app.close();
    await redis.quit();
  });

  it('is cut off with 408 and its connection closed, never handled, while an event stream that outlasts the timeout goes on', async () => {
    const stream = await fetch(new URL('/events', address));
    const streamed = stream.text();

    const stranger = connect(Number(address.port), address.hostname);
    const answer = answerWhenClosed(stranger);
    stranger.write(
      'POST /line/webhook HTTP/1.1\r\nhost: bot.example.com\r\ncontent-type: application/json\r\nx-line-signature: AAAA\r\ncontent-length: 100000\r\n\r\n{"events":[',
    );
    // Never idle, never done: a byte every 50 ms.
    const trickle = setInterval(() => stranger.writable && stranger.write(' '), 50);
    try {
      expect(await waitFor(answer, 10_000, 'the server to close the trickling connection')).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(trickle);
      stranger.destroy();
    }
    expect(handled).toEqual([]);

    // The stream was open all along, longer than the request timeout: it was not cut.
    events.release();
    expect(await streamed).toBe('data: first\n\ndata: last\n\n');
  });
});
