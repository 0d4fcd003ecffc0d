/**
 * The load side of the benches that run a bot as a separate process (e2e,
 * peer), in a driver process of its own: messages POSTed at a fixed rate to
 * the bot's webhook (signed webhook channel or Telegram webhook updates), an
 * instant fake OpenAI-compatible model, a callback receiver and a fake Bot
 * API. The model answers `re <n>` for the message numbers it was asked
 * about, so every reply is matched with its message: latency per message,
 * and the messages never answered or answered more than once.
 */
import { randomBytes } from 'node:crypto';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { signedHeaders } from '../plugins/webhook/signature.js';
import { startFakeOpenAI } from '../testing/fakes/openai-server.js';
import { FAKE_TOKEN, messageUpdate, startFakeTelegram } from '../testing/fakes/telegram-server.js';
import { type Pauses, watchPauses } from './pauses.js';
import { nowMs, WEBHOOK_SECRET as SECRET, TELEGRAM_SECRET as TG_SECRET, WEBHOOK_PATH } from './processes.js';

/** A message and its reply: sent and received, ms since the epoch. */
export type Sample = [number, number];

/** One load run. */
export interface LoadRun {
  /** The bot's base URL. */
  url: string;
  /** Messages per second. */
  rate: number;
  /** Conversations the messages go round (Telegram: private chats). */
  conversations: number;
  channel: 'webhook' | 'telegram';
  /** Measured seconds, after `warmupSeconds` sent but not counted. */
  seconds: number;
  warmupSeconds: number;
  /** How long to wait for the last replies after the last POST, ms. */
  drainMs: number;
}

/** What a run measured; counts are of the measured messages. */
export interface LoadResult {
  /** One per answered message. */
  samples: Sample[];
  /** POSTs that got neither 200 nor 202, and why. */
  failed: number;
  why: Record<string, number>;
  /** Accepted but never answered within `drainMs`. */
  missing: number;
  /** Answers beyond the first, over every message of the run (warm-up included). */
  duplicated: number;
  /** The driver's own event loop over the run. */
  pauses: Pauses;
}

/** The fakes' addresses, given to the bot. */
export interface DriverReady {
  modelUrl: string;
  callbackUrl: string;
  telegramApiRoot: string;
}

export type DriverIn = { run: LoadRun } | 'stop';
export type DriverOut = { ready: DriverReady } | { done: LoadResult };

const MESSAGE_NUMBER = /message (\d+):/g;

/** The numbers of the messages the model is asked to answer: those after its last answer. */
function askedAbout(body: { messages?: Array<{ role: string }> }): number[] {
  const messages = body.messages ?? [];
  let i = messages.length;
  while (i > 0 && messages[i - 1]!.role !== 'assistant') i--;
  return messages.slice(i).flatMap((m) => [...JSON.stringify(m).matchAll(MESSAGE_NUMBER)].map((x) => Number(x[1])));
}

/** The message numbers a reply answers (`re 12,13`). */
const answeredIn = (text: string): number[] => (/re ([\d,]+)/.exec(text)?.[1] ?? '').split(',').filter(Boolean).map(Number);

/** The driver process: answers `{ ready }`, then a `{ done }` per `{ run }`; exits on `'stop'`. */
export async function loadDriver(): Promise<void> {
  const pauses = watchPauses();
  const model = await startFakeOpenAI();
  model.script((body) => ({ text: `re ${askedAbout(body).join(',')}` }));
  const telegram = await startFakeTelegram({ token: FAKE_TOKEN });
  /** Per message number: when it was sent (ms since the epoch), how often it was answered. */
  let sent = new Map<number, { at: number; answers: number; failed?: boolean }>();
  let samples: Sample[] = [];
  let duplicated = 0;
  let measureFrom = Number.POSITIVE_INFINITY;
  /** The next message number: numbers go on across runs, so a late reply to an earlier run matches nothing in this one. */
  let nextNumber = 0;
  const answered = (text: string, at: number) => {
    for (const n of answeredIn(text)) {
      const m = sent.get(n);
      if (!m) continue;
      if (++m.answers > 1) duplicated++;
      else if (m.at >= measureFrom) samples.push([m.at, at]);
    }
  };
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = nowMs();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      answered((JSON.parse(Buffer.concat(chunks).toString()) as { text: string }).text, at);
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callbacks`;
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const send = (m: DriverOut) => process.send!(m);

  process.on('message', async (m: DriverIn) => {
    if (m === 'stop') {
      agent.destroy();
      receiver.closeAllConnections();
      receiver.close();
      await Promise.all([model.close(), telegram.close()]);
      process.exit(0);
    }
    const run = m.run;
    sent = new Map();
    samples = [];
    duplicated = 0;
    let failed = 0;
    const why: Record<string, number> = {};
    const fail = (n: number, reason: string) => {
      const m = sent.get(n);
      if (m && m.at >= measureFrom) failed++;
      if (m) m.failed = true;
      why[reason] = (why[reason] ?? 0) + 1;
    };
    const tag = randomBytes(3).toString('hex');
    const target = new URL(run.channel === 'telegram' ? '/telegram/webhook' : WEBHOOK_PATH, run.url);
    pauses.take();
    const first = nextNumber;
    const post = (i: number) => {
      const n = first + i;
      const c = i % run.conversations;
      // The fake Bot API stamps calls with Date.now(): the same clock for Telegram.
      sent.set(n, { at: run.channel === 'telegram' ? Date.now() : nowMs(), answers: 0 });
      const text = `message ${n}: the quick brown fox`;
      const raw =
        run.channel === 'telegram'
          ? JSON.stringify(messageUpdate({ from: { id: 100_000 + c, is_bot: false, first_name: 'Ann' }, text }))
          : JSON.stringify({ id: `m-${tag}-${n}`, conversation: `c${c}`, sender: { id: `u${c}`, name: 'Ann' }, text });
      const headers =
        run.channel === 'telegram'
          ? { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': TG_SECRET }
          : { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) };
      const req = request(target, { method: 'POST', agent, headers }, (res) => {
        res.resume();
        if (res.statusCode !== 202 && res.statusCode !== 200) fail(n, `HTTP ${res.statusCode}`);
      });
      req.on('error', (err) => fail(n, (err as NodeJS.ErrnoException).code ?? err.message));
      req.end(raw);
    };
    // Bot API calls: each sendMessage as it reached the fake.
    let seenCalls = telegram.calls.length;
    const watchTelegram = setInterval(() => {
      for (; seenCalls < telegram.calls.length; seenCalls++) {
        const call = telegram.calls[seenCalls]!;
        if (call.method === 'sendMessage') answered(String(call.payload.text), call.at);
      }
    }, 2);
    const t0 = nowMs();
    measureFrom = (run.channel === 'telegram' ? Date.now() : t0) + run.warmupSeconds * 1000;
    const total = Math.round((run.warmupSeconds + run.seconds) * run.rate);
    let issued = 0;
    nextNumber += total;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.min(total, Math.floor(((nowMs() - t0) / 1000) * run.rate));
        while (issued < due) post(issued++);
        if (issued >= total) {
          clearInterval(timer);
          resolve();
        }
      }, 2);
    });
    const measured = [...sent.values()].filter((s) => s.at >= measureFrom);
    const unanswered = () => measured.filter((s) => s.answers === 0 && !s.failed).length;
    const deadline = nowMs() + run.drainMs;
    while (unanswered() > 0 && nowMs() < deadline) await new Promise((r) => setTimeout(r, 50));
    clearInterval(watchTelegram);
    send({ done: { samples, failed, why, missing: unanswered(), duplicated, pauses: pauses.take() } });
  });
  send({ ready: { modelUrl: model.url, callbackUrl, telegramApiRoot: telegram.apiRoot } });
}
