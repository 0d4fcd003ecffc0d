/** The console's access API: lists waiting codes (without the codes), refusals and approvals; approves, links, unlinks and purges; refuses bad bodies and a missing token. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AccessStore } from '../../host/access/store.js';
import type { ConsoleOptions } from '../../host/console/routes.js';
import type { HttpServer } from '../../host/http.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { accessSchema } from '../../src/config/schema.js';
import { Budgets } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { consoleCall, serveConsole } from '../helpers/console-api.js';
import { redisUrl } from '../helpers/redis.js';

let h: RunnerHarness;
let http: HttpServer | undefined;
let store: AccessStore;

beforeEach(async () => {
  h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const { ctx } = h;
  store = new AccessStore(ctx.redis, h.prefix, accessSchema.parse({}), new IdentityStore({ redis: ctx.redis, prefix: h.prefix }));
});

/** Channels the console knows (only their ids matter to the access API). */
const ON_CHANNELS = [{ id: 'telegram' }, { id: 'discord' }] as unknown as ChannelPlugin[];

/** Serves the console with `extra` options (budgets, access channel settings). */
async function open(extra: Partial<ConsoleOptions> = {}): Promise<void> {
  http = await serveConsole(h, { access: store, ...extra });
}
afterEach(async () => {
  await http?.close();
  http = undefined;
  await h.close();
});

const call = (method: 'GET' | 'POST', path: string, body?: unknown, token?: string) => consoleCall(http!, method, path, body, token);

const request = () => store.requestCode({ account: 'telegram:1001', channel: 'telegram', userId: '1001', name: 'Alice', conversationId: 'telegram:1001' });

describe('console access API', () => {
  it('lists who waits (never the code), approves by code, and lists the approval', async () => {
    await open();
    const r = await request();
    const code = (r as { code: string }).code;
    const listed = await call('GET', '/access');
    expect(listed.status).toBe(200);
    expect(listed.body.waiting).toEqual([expect.objectContaining({ account: 'telegram:1001', name: 'Alice' })]);
    // When the code expires, as the codes index holds it (Redis's clock; the record's `at` is the host's).
    expect(Math.abs(listed.body.waiting[0].expiresAt - listed.body.waiting[0].at - 3600 * 1000)).toBeLessThan(5000);
    expect(JSON.stringify(listed.body)).not.toContain(code);

    expect(await call('POST', '/access/pair', { code: 'ZZZZ-ZZZZ' })).toEqual({ status: 404, body: { error: 'no such pairing code, or it expired' } });
    expect(await call('POST', '/access/pair', { code })).toEqual({ status: 200, body: { approved: 'telegram:1001', identity: 'telegram:1001' } });
    const after = await call('GET', '/access');
    expect(after.body.waiting).toEqual([]);
    expect(after.body.paired).toEqual(['telegram:1001']);
  });

  it('links, unlinks and purges identities', async () => {
    await open({ channels: ON_CHANNELS });
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
    await open({ channels: ON_CHANNELS });
    expect((await call('POST', '/access/link', { account: 'discord:9' })).status).toBe(400);
    // An account on no channel this host runs (a typo, or a bare user id) could never talk: refused.
    for (const account of ['discrod:9', '1093', 'discord:'])
      expect((await call('POST', '/access/link', { account, to: 'telegram:1' })).body).toEqual({
        error: expect.stringContaining('on a channel this host runs'),
      });
    expect((await call('POST', '/access/link', { account: 'discord:{9}', to: 'telegram:1' })).status).toBe(400);
    expect((await call('POST', '/access/pair', { code: 'x', extra: 1 })).status).toBe(400);
    expect(await h.ctx.redis.keys(`${h.prefix}:{people}:*`)).toEqual([]);
  });

  it('answers 401 without the token', async () => {
    await open();
    for (const path of ['/access', '/people/person?id=telegram:1001', '/people/usage']) {
      expect((await call('GET', path, undefined, 'wrong-token-0123456789')).status).toBe(401);
    }
  });
});

describe('console people API', () => {
  const LIMITS = { tokensPerDay: 1000, runsPerHour: 5 };
  const budgets = () => new Budgets({ client: h.ctx.redis, prefix: h.prefix, settings: { identity: LIMITS } });
  const channels = accessSchema.parse({ channels: { telegram: { policy: 'pairing' }, 'webhook:crm': { policy: 'allowlist', users: ['alice'] } } }).channels;

  it("shows a person looked up by any account: their identity, accounts with their channel's policy, approval, and usage against the limits", async () => {
    await open({ budgets: budgets(), accessChannels: channels });
    await store.identities.link('webhook:crm:alice', 'telegram:1001');
    await store.pair('telegram:1001');
    const spend = budgets();
    expect(await spend.admit({ identity: 'telegram:1001', conversationId: 'telegram:1001' })).toBeUndefined();
    await spend.charge({ identity: 'telegram:1001', conversationId: 'telegram:1001' }, 120);

    const seen = await call('GET', `/people/person?id=${encodeURIComponent('webhook:crm:alice')}`);
    expect(seen.status).toBe(200);
    expect(seen.body).toMatchObject({
      query: 'webhook:crm:alice',
      identity: 'telegram:1001',
      linked: true,
      paired: true,
      accounts: [
        { account: 'telegram:1001', policy: 'pairing', listed: false },
        { account: 'webhook:crm:alice', policy: 'allowlist', listed: true },
      ],
      usage: { tokensToday: 120, tokensThisMonth: 120, runsThisHour: 1 },
      limits: LIMITS,
    });
    expect(seen.body.resets.day).toBeGreaterThan(Date.now());

    const other = await call('GET', '/people/person?id=discord:5');
    expect(other.body).toMatchObject({
      identity: 'discord:5',
      linked: false,
      paired: false,
      accounts: [{ account: 'discord:5', policy: 'open', listed: false }],
    });
    expect(other.body.usage).toEqual({ tokensToday: 0, tokensThisMonth: 0, runsThisHour: 0 });
  });

  it('lists the approved people with their usage, most tokens this month first', async () => {
    await open({ budgets: budgets() });
    for (const id of ['telegram:1', 'telegram:2', 'telegram:3']) await store.pair(id);
    await budgets().charge({ identity: 'telegram:2', conversationId: 'telegram:2' }, 50);
    await budgets().charge({ identity: 'telegram:3', conversationId: 'telegram:3' }, 70);
    const list = await call('GET', '/people/usage');
    expect(list.status).toBe(200);
    expect(list.body.counted).toBe(true);
    expect(list.body.people.map((p: { identity: string; usage: { tokensThisMonth: number } }) => [p.identity, p.usage.tokensThisMonth])).toEqual([
      ['telegram:3', 70],
      ['telegram:2', 50],
      ['telegram:1', 0],
    ]);
  });

  it('says usage is not counted when no identity budget is set', async () => {
    await open({ budgets: new Budgets({ client: h.ctx.redis, prefix: h.prefix, settings: { conversation: { runsPerHour: 3 } } }) });
    await store.pair('telegram:1');
    expect((await call('GET', '/people/person?id=telegram:1')).body).toMatchObject({ identity: 'telegram:1', usage: null, limits: null });
    expect((await call('GET', '/people/usage')).body).toMatchObject({ counted: false, people: [{ identity: 'telegram:1', usage: null }] });
  });

  it('refuses a missing or bad id with 400, writing nothing', async () => {
    await open({ budgets: budgets() });
    for (const q of [
      '',
      '?id=',
      '?id=%20',
      `?id=${encodeURIComponent('telegram:{1}')}`,
      `?id=${encodeURIComponent('telegram:a b')}`,
      `?id=${'x'.repeat(300)}`,
    ]) {
      const res = await call('GET', `/people/person${q}`);
      expect(res.status, q).toBe(400);
      expect(res.body.error, q).toMatch(/id/);
    }
    expect(await h.ctx.redis.keys(`${h.prefix}:*`)).toEqual([]);
  });
});
