/**
 * Chaos: fuzzed requests at the two signed webhook routes (the webhook
 * channel and the Telegram webhook) of one steerbot process (host and runner,
 * the chaos agent, Telegram against the local fake): random bytes, random
 * JSON shapes, near-valid bodies with hostile fields, deep nesting, huge
 * strings, NUL and lone surrogates, `__proto__` keys. No request may get a
 * 5xx or drop its connection, the process must stay up and ready, and no
 * rejected (4xx) request may leave a key: every key that appeared under the
 * prefix belongs to a conversation, a run or a channel an accepted request
 * created.
 */

import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recentKey } from '../../host/console/activity.js';
import { SECRET_HEADER } from '../../plugins/telegram/webhook.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { conversationIdFromKey, conversationKeys } from '../../src/redis/keys.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { waitFor } from '../../testing/wait.js';
import { BUILD_WAIT_MS, packageBuilt } from '../helpers/built-package.js';
import { PrivateServers } from '../helpers/private-servers.js';
import { type FuzzCase, fuzzCases, nestingDepth } from './harness/fuzz-cases.js';
import { CHANNEL, forEachLimited, quiet, StatusCounts, WEBHOOK_PATH, WEBHOOK_SECRET, webhookChannel } from './harness/load.js';
import { ready, type SteerbotProcess, startSteerbot, writeConfig } from './harness/processes.js';

const SCALE = Math.min(1, Number(process.env.CHAOS_SCALE ?? 1));
/** Requests per route. */
const PER_ROUTE = Math.round(1000 * SCALE);
/** fast-check seed; CHAOS_FUZZ_SEED replays a run. */
const SEED = Number(process.env.CHAOS_FUZZ_SEED ?? 0x5eed);
const IN_FLIGHT = 8;
const PREFIX = 'chaos-fuzz';
const QUEUE = `runs-${PREFIX}`;
const TELEGRAM_SECRET = 'chaos-telegram-secret-0123456789';
const TELEGRAM_PATH = '/telegram/webhook';
/** BullMQ's own keys of a queue (the rest are job keys named by run id). */
const BULL_QUEUE_KEYS = new Set([
  'meta',
  'id',
  'events',
  'wait',
  'paused',
  'active',
  'completed',
  'failed',
  'delayed',
  'prioritized',
  'pc',
  'marker',
  'stalled',
  'stalled-check',
  'limiter',
  'de',
  'metrics',
]);

let servers: PrivateServers;
let redis: Redis;
let callbacks: CallbackServer;
let telegram: FakeTelegram;
let config: Awaited<ReturnType<typeof writeConfig>>;
let proc: SteerbotProcess;

// The package built once for the lane (the processes start from its dist/); the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(async () => {
  servers = await PrivateServers.create('chaos-fuzz');
  const url = (await servers.start('redis')).url;
  redis = servers.client(url);
  callbacks = await startCallbackServer(WEBHOOK_SECRET);
  telegram = await startFakeTelegram();
  config = await writeConfig({
    channels: {
      ...webhookChannel(callbacks.url),
      telegram: { token: FAKE_TOKEN, mode: 'webhook', webhookSecret: TELEGRAM_SECRET, webhookPath: TELEGRAM_PATH, apiRoot: telegram.apiRoot, groups: 'always' },
    },
  });
  proc = await startSteerbot({ name: 'steerbot', role: 'both', redisUrl: url, prefix: PREFIX, configFile: config.file });
}, 120_000);

afterAll(async () => {
  await proc?.kill9();
  await callbacks?.close();
  await telegram?.close();
  await servers?.stop();
  await config?.remove();
}, 60_000);

/** Header values fetch can send (the fuzzer's strings often are not). */
const sendableHeader = (v: string) => /^[\t\x20-\x7e]{1,1000}$/.test(v) && v.trim() === v;

async function send(c: FuzzCase): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (c.target === 'webhook') {
    if (c.auth === 'good') Object.assign(headers, signedHeaders(WEBHOOK_SECRET, c.body));
    if (c.auth === 'bad') Object.assign(headers, signedHeaders('not-the-secret-0123456789', c.body));
    if (c.idempotencyKey !== undefined && sendableHeader(c.idempotencyKey)) headers['idempotency-key'] = c.idempotencyKey;
  } else {
    if (c.auth === 'good') headers[SECRET_HEADER] = TELEGRAM_SECRET;
    if (c.auth === 'bad') headers[SECRET_HEADER] = 'wrong-secret-0123456789';
  }
  try {
    const res = await fetch(`${proc.url}${c.target === 'webhook' ? WEBHOOK_PATH : TELEGRAM_PATH}`, {
      method: 'POST',
      headers,
      body: c.body,
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { status: 0, body: `${String(err)} (${cause?.code ?? cause?.message ?? 'no cause'})` };
  }
}

/** Every key under the prefix and the queue's BullMQ prefix. */
async function keys(): Promise<Set<string>> {
  const out = new Set<string>();
  for (const pattern of [`${PREFIX}:*`, `${bullPrefixFor(PREFIX)}:*`]) {
    let cursor = '0';
    do {
      const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const k of batch) out.add(k);
    } while (cursor !== '0');
  }
  return out;
}

/** The conversation an accepted request addressed, as the channel names it (a Telegram one may add `:<thread>`). */
function conversationOf(c: FuzzCase): string | undefined {
  let body: any;
  try {
    body = JSON.parse(c.body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (c.target === 'webhook') return typeof body?.conversation === 'string' ? `${CHANNEL}:${body.conversation}` : undefined;
  // A button click under a message (the channel reads it first; its conversation is the message's), or a message.
  const chat = body?.callback_query !== undefined ? body.callback_query?.message?.chat?.id : body?.message?.chat?.id;
  return typeof chat === 'number' ? `telegram:${chat}` : undefined;
}

describe('chaos: fuzzed webhook and Telegram-webhook requests', () => {
  it(`answers ${2 * PER_ROUTE} fuzzed requests without a 5xx or a crash, and no rejected one writes a key`, async () => {
    const cases = [...fuzzCases('webhook', PER_ROUTE, SEED, 1), ...fuzzCases('telegram', PER_ROUTE, SEED + 1, 1_000_000)];
    const before = await keys();
    const statuses = new StatusCounts();
    const byKind = new Map<string, StatusCounts>();
    const failures: string[] = [];
    const accepted: FuzzCase[] = [];
    let droppedOversized = 0;
    await forEachLimited(cases, IN_FLIGHT, async (c, i) => {
      let { status, body } = await send(c);
      // A request that got no answer at all (a pooled connection closed as it was sent) is sent once more, as a
      // platform redelivers one: a second failure counts. Bodies over the server's limit are explained below.
      if (status === 0 && c.body.length <= DEFAULTS.http.bodyLimitBytes) ({ status, body } = await send(c));
      // A 503 "redis unreachable" is ingress failing fast because Redis answered slower than its 1 s timeout (a loaded
      // machine), not the input's doing: a platform redelivers it. Two more tries; a 5xx after them counts.
      for (let retry = 0; retry < 2 && status === 503 && body.includes('redis unreachable'); retry++) ({ status, body } = await send(c));
      statuses.add(status);
      const kind = `${c.target}/${c.kind}`;
      if (!byKind.has(kind)) byKind.set(kind, new StatusCounts());
      byKind.get(kind)!.add(status);
      // Node's HTTP server answers 413 to a body over its limit and closes the connection, and fetch, still
      // writing megabytes, may see that close before the answer: a refusal too, not a failure.
      if (status === 0 && c.body.length > DEFAULTS.http.bodyLimitBytes) {
        droppedOversized++;
        return;
      }
      if (status === 0 || status >= 500)
        failures.push(`#${i} ${kind} auth=${c.auth} → ${status} ${body.slice(0, 200)}; body ${c.body.toString('utf8').slice(0, 200)}`);
      if (status >= 200 && status < 300) accepted.push(c);
      else if (status < 400) failures.push(`#${i} ${kind} → unexpected ${status}`);
    });

    // Accepted messages are answered (the runner and the callbacks write their keys too), then the keys are compared.
    await waitFor(() => quiet(redis, PREFIX), 120_000, 'no run active and no callback pending', 200);
    const allowed = new Set(accepted.map(conversationOf).filter((c): c is string => c !== undefined));
    const isAllowed = (cid: string) => allowed.has(cid) || [...allowed].some((a) => a.startsWith('telegram:') && cid.startsWith(`${a}:`));
    const runIds = new Set<string>();
    for (const keyName of await keys()) {
      const cid = conversationIdFromKey(PREFIX, keyName);
      if (cid !== undefined && keyName === conversationKeys(PREFIX, cid).runs) for (const r of await redis.zrange(keyName, '0', '-1')) runIds.add(r);
    }
    const channels = new Set(accepted.map((c) => (c.target === 'webhook' ? CHANNEL : 'telegram')));
    const unexplained: string[] = [];
    for (const k of await keys()) {
      if (before.has(k)) continue;
      const cid = conversationIdFromKey(PREFIX, k);
      if (cid !== undefined) {
        if (!isAllowed(cid)) unexplained.push(k);
        continue;
      }
      const bull = `${bullPrefixFor(PREFIX)}:${QUEUE}:`;
      if (k.startsWith(bull)) {
        const head = k.slice(bull.length).split(':')[0]!;
        if (!BULL_QUEUE_KEYS.has(head) && !runIds.has(head)) unexplained.push(k);
        continue;
      }
      // The schedules queue's worker keeps BullMQ's bookkeeping (its stalled check every 30 s) whatever arrives; a
      // fire job in it would need a schedule, which no fuzzed request can make.
      const schedules = `${bullPrefixFor(PREFIX)}:${DEFAULTS.schedules.queueName}:`;
      if (k.startsWith(schedules)) {
        if (!BULL_QUEUE_KEYS.has(k.slice(schedules.length).split(':')[0]!)) unexplained.push(k);
        continue;
      }
      // The console's index of recent conversations: deployment-wide, written after an ingest; only accepted conversations may be in it.
      if (k === recentKey(PREFIX)) {
        for (const member of await redis.zrange(k, '0', '-1')) if (!isAllowed(member)) unexplained.push(`${k} ∋ ${member}`);
        continue;
      }
      // Which conversations an account wrote in (for a person's export): written after an ingest; only accepted conversations may be in it.
      if (k.startsWith(`${PREFIX}:{i:`) && k.endsWith('}:conversations')) {
        for (const member of await redis.hkeys(k)) if (!isAllowed(member)) unexplained.push(`${k} ∋ ${member}`);
        continue;
      }
      if (![...channels].some((ch) => k.startsWith(`${PREFIX}:${ch}:`))) unexplained.push(k);
    }

    console.log(
      `[chaos] fuzz: seed ${SEED}, ${cases.length} requests (${PER_ROUTE} per route, scale ${SCALE}); statuses ${statuses} (0: ${droppedOversized} bodies over the ${DEFAULTS.http.bodyLimitBytes}-byte server limit cut off while being sent); ` +
        `${accepted.length} accepted into ${allowed.size} conversations (${accepted.filter((c) => nestingDepth(c.body) >= 1000).length} nested 1 000+ levels deep); ${runIds.size} runs; replies: ${callbacks.accepted().length} callbacks, ${telegram.sent.length} Telegram messages\n` +
        [...byKind].map(([k, s]) => `  ${k}: ${s}`).join('\n'),
    );
    expect(failures.slice(0, 20)).toEqual([]);
    expect(unexplained.slice(0, 20)).toEqual([]);
    // Some requests of each route got through, so the check above looked at accepted keys too.
    expect(accepted.some((c) => c.target === 'webhook')).toBe(true);
    expect(accepted.some((c) => c.target === 'telegram')).toBe(true);
    expect(proc.exitStatus(), `steerbot exited:\n${proc.output()}`).toBeUndefined();
    expect(await ready(proc.url)).toBe(true);
  }, 300_000);
});
