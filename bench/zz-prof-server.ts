import { createHttpServer, listen } from '../host/http.js';
import { startHost } from '../host/main.js';
import { webhookChannelConfigSchema } from '../plugins/webhook/config.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { createRedis, redisFromConfig } from '../src/redis.js';
const redisUrl = process.env.R!;
const prefix = 'prof' + Math.random().toString(36).slice(2, 6);
const base = loadConfig({ env: { REDIS_URL: redisUrl, STEERBOT_PREFIX: prefix, STEERBOT_QUEUE_NAME: `bench-${prefix}`, STEERBOT_RUNNER: 'false', LOG_LEVEL: 'silent' } });
const config = { ...base, channels: { webhooks: { bench: webhookChannelConfigSchema.parse({ secret: 'bench-secret-0123456789abcdef', maxSkewSeconds: 3600 }) } } };
const logger = createLogger({ level: 'silent' });
const redis = createRedis({ url: redisUrl }); if (process.env.AP) (redis as any).options.enableAutoPipelining = true;
const http = createHttpServer({ config, redis, logger });
await startHost({ config, logger, redisUrl, redisConnection: { url: redisUrl }, redis, connectRedis: (o = {}) => redisFromConfig(config.redis, { ...o, url: redisUrl }), http } as any, {});
http.post('/bench/bare', async (_req, reply) => reply.code(202).send({ result: 'accepted' }));
const address = await listen(http, { host: '127.0.0.1', port: 0 });
console.log(address);
const { Session } = await import('node:inspector/promises');
const s = new Session(); s.connect(); await s.post('Profiler.enable');
process.on('message', async (m) => {
  if (m === 'start') { await s.post('Profiler.start'); process.send!('started'); }
  if (m === 'stop') { const { profile } = await s.post('Profiler.stop'); (await import('node:fs')).writeFileSync(`/tmp/prof/${process.env.NAME}.cpuprofile`, JSON.stringify(profile)); process.send!('stopped'); }
});
