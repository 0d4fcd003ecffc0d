/**
 * Access is the host's own first step, not a registered feature: a
 * composition that registers no feature at all still refuses a stranger on an
 * allow-listed channel, and writes nothing for them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { type StartedHost, startHost } from '../../host/main.js';
import { createWebhookPlugin } from '../../plugins/webhook/index.js';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import type { AppContext } from '../../src/app-context.js';
import { accessSchema } from '../../src/config/schema.js';
import { readRange } from '../../src/record/read.js';
import { closeRedis } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { createTestContext } from '../../testing/runner-context.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const SECRET = 'whsec-access-always-0123456789abcdef';

let running: { ctx: AppContext; http: HttpServer; host: StartedHost; prefix: string } | undefined;

afterEach(async () => {
  if (!running) return;
  await running.http.close();
  await running.host.stop();
  await cleanupPrefix(running.ctx.redis, running.prefix);
  await closeRedis(running.ctx.redis);
  running = undefined;
});

async function post(url: string, id: string, sender: string, text: string): Promise<number> {
  const raw = JSON.stringify({ id, conversation: `chat-${sender}`, text, sender: { id: sender } });
  const res = await fetch(`${url}/webhooks/crm`, { method: 'POST', headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, raw) }, body: raw });
  await res.arrayBuffer();
  return res.status;
}

describe('a host with no registered feature', () => {
  it('still refuses a stranger on an allow-listed channel and records nothing of theirs', async () => {
    const prefix = testPrefix();
    const base = createTestContext({ redisUrl: redisUrl(), prefix });
    const access = accessSchema.parse({ channels: { 'webhook:crm': { policy: 'allowlist', users: ['ann'] } } });
    const ctx: AppContext = { ...base, config: { ...base.config, access } };
    const webhook = createWebhookPlugin('crm', { secret: SECRET }, { logger: ctx.logger, redis: ctx.redis, prefix });
    const http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger: ctx.logger });
    const host = await startHost({ ...ctx, http }, { channels: [webhook], steeringCapable: true, features: [] });
    running = { ctx, http, host, prefix };
    const url = await listen(http, { host: '127.0.0.1', port: 0 });

    await post(url, 'm1', 'mallory', 'let me in');
    await post(url, 'm2', 'ann', 'hello');

    expect(await readRange(ctx.redis, conversationKeys(prefix, 'webhook:crm:chat-mallory').log)).toEqual([]);
    expect((await readRange(ctx.redis, conversationKeys(prefix, 'webhook:crm:chat-ann').log)).map((e) => (e as { text?: string }).text)).toEqual(['hello']);
  });
});
