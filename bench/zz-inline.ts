import { Agent, request } from 'node:http';
import { createHttpServer, listen } from '../host/http.js';
import { startHost } from '../host/main.js';
import { webhookChannelConfigSchema } from '../plugins/webhook/config.js';
import { signedHeaders, checkSignature } from '../plugins/webhook/signature.js';
import { webhookBodySchema } from '../plugins/webhook/inbound.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { createRedis, redisFromConfig } from '../src/redis.js';
const redisUrl = process.env.R!;
const prefix = 'inl' + Math.random().toString(36).slice(2, 6);
const base = loadConfig({ env: { REDIS_URL: redisUrl, STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `bench-${prefix}`, STEERBOT_RUNNER: 'false', LOG_LEVEL: 'silent' } });
const config = { ...base, channels: { webhooks: { bench: webhookChannelConfigSchema.parse({ secret: 'bench-secret-0123456789abcdef', maxSkewSeconds: 3600 }) } } };
const logger = createLogger({ level: 'silent' });
const redis = createRedis({ url: redisUrl });
const http = createHttpServer({ config, redis, logger });
const host = await startHost({ config, logger, redisUrl, redisConnection: { url: redisUrl }, redis, connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, url: redisUrl }), http } as any, {});
http.post('/bench/bare', async (_req, reply) => reply.code(202).send({ result: 'accepted' }));
await http.register(async (scope) => {
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  scope.post('/bench/raw', async (req, reply) => reply.code(202).send({ result: 'accepted' }));
  scope.post('/bench/sig', async (req, reply) => {
    const raw = req.body as Buffer;
    if (checkSignature('bench-secret-0123456789abcdef', req.headers, raw, Math.floor(Date.now() / 1000), 3600)) return reply.code(401).send({});
    webhookBodySchema.parse(JSON.parse(raw.toString('utf8')));
    return reply.code(202).send({ result: 'accepted' });
  });
});
http.post('/bench/ingest', async (req, reply) => { const b = req.body as any; const r = await host.dispatch.ingest({ conversationId: 'webhook:bench:' + b.conversation, updateKey: 'webhook:bench:' + b.id, sender: b.sender, text: b.text }); return reply.code(202).send({ result: r.kind, seq: r.seq }); });
http.post('/bench/ping', async (_req, reply) => { await redis.ping(); return reply.code(202).send({ result: 'accepted' }); });
const url = new URL(await listen(http, { host: '127.0.0.1', port: 0 }));
const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const now = Math.floor(Date.now() / 1000);
async function run(path: string, N: number, tag: string) {
  const reqs = Array.from({ length: N }, (_, i) => { const body = Buffer.from(JSON.stringify({ id: `${tag}${i}`, conversation: `c${i % 1000}`, sender: { id: 'u', name: 'A' }, text: 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call '.repeat(3) })); return { body, headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...signedHeaders('bench-secret-0123456789abcdef', body, now) } }; });
  let next = 0; const t0 = performance.now();
  await Promise.all(Array.from({ length: 32 }, async () => { while (next < N) { const r = reqs[next++]!; await new Promise<number>((res, rej) => { const q = request({ agent, host: url.hostname, port: url.port, path, method: 'POST', headers: r.headers }, (x) => { x.resume(); x.on('end', () => res(x.statusCode!)); }); q.on('error', rej); q.end(r.body); }); } }));
  return N / (performance.now() - t0) * 1000;
}
await run('/webhooks/bench', 2000, 'w'); await run('/bench/bare', 2000, 'w');
for (let i = 0; i < 4; i++) { const b = await run('/bench/bare', 6000, `b${i}`); const r = await run('/bench/raw', 6000, `r${i}`); const p = await run('/bench/sig', 6000, `p${i}`); const g = await run('/bench/ingest', 6000, `g${i}`); const h = await run('/webhooks/bench', 6000, `h${i}`); console.log('bare', b.toFixed(0), 'raw', (r / b * 100).toFixed(1) + '%', 'sig', (p / b * 100).toFixed(1) + '%', 'ingest', (g / b * 100).toFixed(1) + '%', 'hook', (h / b * 100).toFixed(1) + '%'); }
agent.destroy(); await http.close(); process.exit(0);
