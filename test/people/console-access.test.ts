/** The console's access API: lists waiting codes (without the codes), refusals and approvals; approves, links, unlinks and purges; refuses bad bodies and a missing token. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AccessStore } from '../../host/access/store.js';
import { registerConsole } from '../../host/console/routes.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { accessSchema } from '../../src/config-schema.js';
import { IdentityStore } from '../../src/identity.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { redisUrl } from '../helpers/redis.js';

const TOKEN = 'console-token-0123456789';
let h: RunnerHarness;
let http: HttpServer;
let store: AccessStore;

beforeEach(async () => {
  h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const { ctx } = h;
  http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger: ctx.logger });
  store = new AccessStore(ctx.redis, h.prefix, accessSchema.parse({}), new IdentityStore({ redis: ctx.redis, prefix: h.prefix }));
  registerConsole({
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    dispatch: h.dispatch,
    queue: h.queue,
    logger: ctx.logger,
    token: TOKEN,
    traceUrl: undefined,
    channelPolicy: () => undefined,
    enqueue: async () => undefined,
    access: store,
  });
  await http.ready();
});
afterEach(async () => {
  await http.close();
  await h.close();
});

async function call(method: 'GET' | 'POST', path: string, body?: unknown, token = TOKEN): Promise<{ status: number; body: any }> {
  const res = await http.inject({
    method,
    url: `/console/api${path}`,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

const request = () => store.requestCode({ account: 'telegram:1001', channel: 'telegram', userId: '1001', name: 'Alice', conversationId: 'telegram:1001' });

describe('console access API', () => {
  it('lists who waits (never the code), approves by code, and lists the approval', async () => {
    const r = await request();
    const code = (r as { code: string }).code;
    const listed = await call('GET', '/access');
    expect(listed.status).toBe(200);
    expect(listed.body.waiting).toEqual([expect.objectContaining({ account: 'telegram:1001', name: 'Alice' })]);
    expect(JSON.stringify(listed.body)).not.toContain(code);

    expect(await call('POST', '/access/pair', { code: 'ZZZZ-ZZZZ' })).toEqual({ status: 404, body: { error: 'no such pairing code, or it expired' } });
    expect(await call('POST', '/access/pair', { code })).toEqual({ status: 200, body: { approved: 'telegram:1001', identity: 'telegram:1001' } });
    const after = await call('GET', '/access');
    expect(after.body.waiting).toEqual([]);
    expect(after.body.paired).toEqual(['telegram:1001']);
  });

  it('links, unlinks and purges identities', async () => {
    expect((await call('POST', '/access/link', { account: 'discord:9', to: 'telegram:1001' })).body).toEqual({
      kind: 'linked',
      identity: 'telegram:1001',
      from: 'discord:9',
    });
    expect(await store.identities.resolve('discord', '9')).toBe('telegram:1001');
    expect((await call('POST', '/access/unlink', { account: 'discord:9' })).body).toEqual({ left: 'telegram:1001' });
    await call('POST', '/access/link', { account: 'discord:9', to: 'telegram:1001' });
    const purged = await call('POST', '/access/purge', { identity: 'telegram:1001' });
    expect(purged.body.unlinked.sort()).toEqual(['discord:9', 'telegram:1001']);
    expect(await store.identities.resolve('discord', '9')).toBe('discord:9');
  });

  it('refuses bad bodies and bad ids with 400, writing nothing', async () => {
    expect((await call('POST', '/access/link', { account: 'discord:9' })).status).toBe(400);
    expect((await call('POST', '/access/link', { account: 'discord:{9}', to: 'telegram:1' })).status).toBe(400);
    expect((await call('POST', '/access/pair', { code: 'x', extra: 1 })).status).toBe(400);
    expect(await h.ctx.redis.keys(`${h.prefix}:{people}:*`)).toEqual([]);
  });

  it('answers 401 without the token', async () => {
    expect((await call('GET', '/access', undefined, 'wrong-token-0123456789')).status).toBe(401);
  });
});
