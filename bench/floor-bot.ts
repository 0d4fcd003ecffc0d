/**
 * The floor the peer bench holds steerbot against: the least a Telegram bot
 * in webhook mode does to answer each private message once. A node:http
 * server takes the webhook POSTs (the secret header checked first), drops a
 * repeated `update_id` with one `SET NX` (a TTL, as Telegram retries for a
 * day at most), acknowledges, then asks the model (chat completions, not
 * streamed, the message alone) and sends its answer with `sendMessage`. No
 * history, no queue, no retry: what is lost on a crash is lost.
 *
 * Run as a child process (role `floor`) speaking `appProcess`'s protocol:
 * `{ start: AppSpec }` → `{ started: { address } }`, `'stop'` → exit.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { FAKE_TOKEN } from '../testing/fakes/telegram-server.js';
import { type AppSpec, TELEGRAM_SECRET } from './processes.js';

/** How long a seen `update_id` is remembered, s: Telegram gives up redelivering after 24 hours. */
const DEDUPE_TTL_SECONDS = 86_400;

interface Update {
  update_id?: unknown;
  message?: { text?: unknown; chat?: { id?: unknown; type?: unknown } };
}

/** The child's side: starts the floor bot with the spec it is sent. */
export function floorProcess(): void {
  let stop: (() => Promise<void>) | undefined;
  process.on('message', async (m: { start: AppSpec } | string) => {
    if (m === 'stop') {
      await stop?.();
      process.exit(0);
    }
    if (typeof m === 'string') return;
    const floor = await startFloorBot(m.start);
    stop = floor.stop;
    process.send!({ started: { address: floor.address } });
  });
}

async function startFloorBot(spec: AppSpec): Promise<{ address: string; stop(): Promise<void> }> {
  const redis = new Redis(spec.redisEnv.REDIS_URL!);
  const sendMessage = `${spec.telegramApiRoot}/bot${FAKE_TOKEN}/sendMessage`;
  const complete = `${spec.modelUrl}/chat/completions`;
  const json = { 'content-type': 'application/json' };

  const answer = async (chatId: number, text: string) => {
    const res = await fetch(complete, {
      method: 'POST',
      headers: { ...json, authorization: 'Bearer k' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
    });
    const reply = ((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content;
    await (await fetch(sendMessage, { method: 'POST', headers: json, body: JSON.stringify({ chat_id: chatId, text: reply }) })).arrayBuffer();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const end = (status: number) => res.writeHead(status, json).end('{}');
    if (req.method !== 'POST' || req.url !== '/telegram/webhook') return end(404);
    if (req.headers['x-telegram-bot-api-secret-token'] !== TELEGRAM_SECRET) return end(401);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let update: Update;
    try {
      update = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      return end(400);
    }
    if (typeof update.update_id !== 'number') return end(400);
    let fresh: string | null;
    try {
      fresh = await redis.set(`${spec.prefix}:update:${update.update_id}`, '1', 'EX', DEDUPE_TTL_SECONDS, 'NX');
    } catch {
      return end(503); // Telegram retries
    }
    end(200);
    const { text, chat } = update.message ?? {};
    if (fresh === null || typeof text !== 'string' || chat?.type !== 'private' || typeof chat.id !== 'number') return;
    // A failed answer is dropped: the bench counts it as missing.
    await answer(chat.id, text).catch(() => undefined);
  };

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(spec.port, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    address: `http://127.0.0.1:${port}`,
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      redis.disconnect();
    },
  };
}
