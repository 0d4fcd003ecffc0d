/**
 * Ingest throughput through the TypeScript API, Redis round trips per update
 * (from INFO commandstats deltas and from the client's own command count),
 * and the ratio to a no-op EVALSHA loop at the same concurrency.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { Dispatch } from '../src/protocol/index.js';
import { conversationKeys } from '../src/keys.js';
import { runScript } from '../src/scripts/index.js';
import { commandCalls, countSent, privateRedis } from './private-redis.js';

const UPDATES = Number(process.env.BENCH_UPDATES ?? 20_000);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? 1_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

const WORDS = 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call'.split(' ');
function text(): string {
  const n = 20 + Math.floor(Math.random() * 80); // 20-100 words: ~100-600 characters
  return Array.from({ length: n }, () => WORDS[Math.floor(Math.random() * WORDS.length)]).join(' ');
}

async function pool(n: number, concurrency: number, task: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await task(next++);
    }),
  );
  return performance.now() - t0;
}


export async function main(): Promise<void> {
  const redis = await privateRedis();
  const client = new Redis(redis.url);
  const admin = new Redis(redis.url);
  const prefix = `bench${randomBytes(3).toString('hex')}`;
  const dispatch = new Dispatch({ client, prefix });
  const messages = Array.from({ length: UPDATES }, (_, i) => ({
    conversationId: `telegram:${i % CONVERSATIONS}`,
    updateKey: `telegram:${i}`,
    sender: { id: `u${i % CONVERSATIONS}`, name: 'Ada' },
    text: text(),
    messageId: String(i),
  }));
  // Warm-up: loads the scripts (EVALSHA misses once, then EVAL) outside the measurement.
  await dispatch.ingest({ ...messages[0]!, conversationId: 'warm:1', updateKey: 'warm:1' });
  await runScript(client, 'noop', [conversationKeys(prefix, 'warm:1').meta], []);

  const sent = countSent(client);
  const before = await commandCalls(admin, ['evalsha', 'eval']);
  const sentBefore = sent.count();
  const ingestMs = await pool(UPDATES, CONCURRENCY, (i) => dispatch.ingest(messages[i]!));
  const scriptCalls = (await commandCalls(admin, ['evalsha', 'eval'])) - before;
  const clientCommands = sent.count() - sentBefore;

  const noopKeys = Array.from({ length: CONVERSATIONS }, (_, i) => conversationKeys(prefix, `telegram:${i}`).meta);
  const noopMs = await pool(UPDATES, CONCURRENCY, (i) => runScript(client, 'noop', [noopKeys[i % CONVERSATIONS]!], []));

  const ingestRate = (UPDATES / ingestMs) * 1000;
  const noopRate = (UPDATES / noopMs) * 1000;
  console.log(`ingest benchmark: ${UPDATES} updates, ${CONVERSATIONS} conversations, concurrency ${CONCURRENCY}, one connection${redis.shared ? ' (SHARED redis: counts may include other clients)' : ' (private redis-server)'}`);
  console.log(`  ingest rate:                 ${ingestRate.toFixed(0)} updates/s`);
  console.log(`  no-op EVALSHA rate:          ${noopRate.toFixed(0)} calls/s`);
  console.log(`  ratio ingest / no-op:        ${((ingestRate / noopRate) * 100).toFixed(1)} %   (target >= 50 %)`);
  console.log(`  round trips per update:      ${(scriptCalls / UPDATES).toFixed(3)} (INFO commandstats evalsha+eval delta)`);
  console.log(`  client commands per update:  ${(clientCommands / UPDATES).toFixed(3)} (commands written by the client)`);

  await client.quit();
  await admin.quit();
  await redis.stop();
}
