/**
 * Attacks on the export (docs/people.md#export): it hands out a person's
 * data, so the console's download needs the operator's login and refuses a
 * request another site's page makes (also from a loopback browser, which
 * needs no cookie when `allowLoopback` is on); a person's export never holds
 * another person's words, even from a group they share; and no export holds
 * a secret (pairing or link codes, their hashes, API token digests).
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { codeHash } from '../../host/access/codes.js';
import { AccessStore } from '../../host/access/store.js';
import { revokeApiToken } from '../../host/api-tokens.js';
import type { HttpServer } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import type { ChannelHost, ChannelPlugin, InboundMessage } from '../../src/channel.js';
import { accessSchema } from '../../src/config/schema.js';
import { OPERATOR_COOKIE } from '../../src/http/access.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore } from '../../src/people/memory.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { CONSOLE_TOKEN, serveConsole } from '../helpers/console-api.js';
import { testHostFeatures } from '../helpers/host-features.js';
import { redisUrl } from '../helpers/redis.js';

const ALICE = 'telegram:1';
const BOB = 'telegram:2';
const GROUP = 'telegram:-100';

interface World {
  h: RunnerHarness;
  http: HttpServer;
  host: ChannelHost;
  store: AccessStore;
}

let world: World | undefined;
afterEach(async () => {
  await world?.http.close();
  await world?.h.close();
  world = undefined;
});

/** The channel host with the people parts (where each person wrote is noted) and the console, with loopback clients let in when asked. */
async function start(allowLoopback = false): Promise<World> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const identities = new IdentityStore({ redis: h.redis, prefix: h.prefix });
  const store = new AccessStore(h.redis, h.prefix, accessSchema.parse({}), identities);
  const features = await testHostFeatures({ config: h.ctx.config, redis: h.redis, prefix: h.prefix, identities });
  const host = createChannelHost({
    features,
    routes: { add: () => undefined },
    redis: h.redis,
    prefix: h.prefix,
    logger: h.ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: async () => undefined,
    outbound: () => h.outbound,
  });
  const http = await serveConsole(h, { access: store, allowLoopback, channels: [{ id: 'telegram' } as ChannelPlugin], features });
  world = { h, http, host, store };
  return world;
}

let update = 0;
const say = (host: ChannelHost, conversationId: string, userId: string, text: string, group = false) => {
  const message: InboundMessage = {
    conversationId,
    updateKey: `telegram:${++update}`,
    chatId: conversationId.slice('telegram:'.length),
    sender: { id: userId },
    text,
    ...(group && { group: true }),
  };
  return host.receive('telegram', message);
};

const get = (http: HttpServer, url: string, headers: Record<string, string> = {}, remoteAddress?: string) =>
  http.inject({ method: 'GET', url, headers, ...(remoteAddress && { remoteAddress }) });

const EXPORTS = [`/console/api/conversations/${encodeURIComponent(ALICE)}/export`, `/console/api/people/export?id=${encodeURIComponent(ALICE)}`];

describe('export', () => {
  it('refuses an export without the console login, or when another site asks, and never lets another origin embed it', async () => {
    const { http, host } = await start();
    await say(host, ALICE, '1', 'my address is 12 Rue Exemple');
    const cookie = { cookie: `${OPERATOR_COOKIE}=${CONSOLE_TOKEN}` };
    for (const url of EXPORTS) {
      for (const headers of [{}, { authorization: 'Bearer guessed-token' }, { cookie: `${OPERATOR_COOKIE}=guessed-token` }]) {
        const res = await get(http, url, headers);
        expect(res.statusCode, `${url} ${JSON.stringify(headers)}`).toBe(401);
        expect(res.body).not.toContain('12 Rue Exemple');
      }
      for (const from of [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://evil.example', host: 'console.example' }]) {
        const res = await get(http, url, { ...cookie, ...from });
        expect(res.statusCode, `${url} ${JSON.stringify(from)}`).toBe(403);
        expect(res.body).not.toContain('12 Rue Exemple');
      }
      const ok = await get(http, url, { ...cookie, 'sec-fetch-site': 'same-origin' });
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toContain('12 Rue Exemple');
      expect(ok.headers).toMatchObject({
        'content-type': 'application/json; charset=utf-8',
        'content-disposition': `attachment; filename="steerbot-export-telegram_1.json"`,
        'x-content-type-options': 'nosniff',
        'cross-origin-resource-policy': 'same-origin',
        'cache-control': 'no-store',
      });
      expect(ok.headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('refuses a cross-site export request from a loopback browser, which needs no login when allowLoopback is on', async () => {
    const { http, host } = await start(true);
    await say(host, ALICE, '1', 'my address is 12 Rue Exemple');
    const local = { host: 'localhost:8080' };
    for (const url of EXPORTS) {
      expect((await get(http, url, { ...local, 'sec-fetch-site': 'none' }, '127.0.0.1')).statusCode).toBe(200);
      const res = await get(http, url, { ...local, 'sec-fetch-site': 'cross-site' }, '127.0.0.1');
      expect(res.statusCode).toBe(403);
      expect(res.body).not.toContain('12 Rue Exemple');
    }
  });

  it("a person's export holds none of another person's words, even from a group they share", async () => {
    const { http, host } = await start();
    await say(host, ALICE, '1', 'alice direct');
    await say(host, GROUP, '1', 'alice in the group', true);
    await say(host, GROUP, '2', 'bob whispers a secret in the group', true);
    await say(host, BOB, '2', 'bob direct');
    const res = await get(http, `/console/api/people/export?id=${encodeURIComponent(ALICE)}`, { authorization: `Bearer ${CONSOLE_TOKEN}` });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.conversations.map((c: { conversation: string; scope: string }) => [c.conversation, c.scope])).toEqual([
      [GROUP, 'own-messages'],
      [ALICE, 'full'],
    ]);
    expect(doc.conversations[0].record.map((e: { text: string }) => e.text)).toEqual(['alice in the group']);
    for (const theirs of ['bob whispers', 'bob direct', BOB]) expect(res.body).not.toContain(theirs);
  });

  it('holds no secret: no pairing or link code, no hash of one, no API token or its digest', async () => {
    const { h, http, host, store } = await start();
    await say(host, ALICE, '1', 'hello');
    await new MemoryStore({ redis: h.redis, prefix: h.prefix }).save(ALICE, 'likes tea');
    const pairing = await store.requestCode({ account: ALICE, channel: 'telegram', userId: '1', conversationId: ALICE });
    const link = await store.linkCode(ALICE, true);
    const token = 'api-token-export-0123456789abcdef';
    expect(await revokeApiToken(h.redis, h.prefix, { ...h.ctx.config.host.api, token }, 'default')).toBe(true);
    const codes = [link, ...(pairing.kind === 'code' ? [pairing.code] : [])];
    expect(codes.length).toBe(2);
    const secrets = [...codes, ...codes.map(codeHash), token, createHash('sha256').update(token).digest('hex'), CONSOLE_TOKEN];
    for (const url of EXPORTS) {
      const res = await get(http, url, { authorization: `Bearer ${CONSOLE_TOKEN}` });
      expect(res.statusCode).toBe(200);
      for (const secret of secrets) expect(res.body.toLowerCase()).not.toContain(secret.toLowerCase());
    }
  });
});
