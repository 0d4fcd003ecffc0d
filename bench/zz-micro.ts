import { Redis } from 'ioredis';
import { Dispatch } from '../src/protocol/dispatch.js';
import { checkSignature, signedHeaders } from '../plugins/webhook/signature.js';
import { webhookBodySchema } from '../plugins/webhook/inbound.js';
const N = 20000;
const body = Buffer.from(JSON.stringify({ id: 'x', conversation: 'c1', sender: { id: 'u', name: 'A' }, text: 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call '.repeat(3) }));
const h = signedHeaders('bench-secret-0123456789abcdef', body);
function t(name: string, f: (i: number) => unknown) { for (let i = 0; i < 2000; i++) f(i); const t0 = performance.now(); for (let i = 0; i < N; i++) f(i); console.log(name, ((performance.now() - t0) / N * 1000).toFixed(2), 'µs'); }
t('checkSignature', () => checkSignature('bench-secret-0123456789abcdef', h, body, Math.floor(Date.now() / 1000), 300));
t('JSON.parse+zod', () => webhookBodySchema.safeParse(JSON.parse(body.toString('utf8'))));
const redis = new Redis(process.env.R!);
const d = new Dispatch({ client: redis, prefix: 'micro' + Date.now() });
const msg = (i: number) => ({ conversationId: `webhook:b:c${i % 1000}`, updateKey: `webhook:b:${i}-${Math.random()}`, sender: { id: 'u', name: 'A' }, text: 'the quick brown fox '.repeat(15) });
await d.ingest(msg(0));
for (const c of [1, 32]) {
  const t0 = performance.now(); let next = 0; const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: c }, async () => { while (next < N) await d.ingest(msg(next++)); }));
  const cpu = process.cpuUsage(cpu0);
  console.log(`ingest c=${c}`, ((performance.now() - t0) / N * 1000).toFixed(2), 'µs wall/op', ((cpu.user + cpu.system) / N).toFixed(2), 'µs cpu/op');
}
redis.disconnect();
