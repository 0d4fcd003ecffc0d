/**
 * Attacks on the Teams messaging endpoint, black-box over HTTP against the
 * real plugin on the real channel host (access policy `pairing`, one
 * configured admin) and the fake Teams: tokens the operator's own tenant
 * issues to any of its apps, Bot Service tokens that name no or another
 * service URL, a service URL on a host anyone can register a name under, an
 * activity from the Azure Bot's Web Chat, key ids made up to make the host
 * fetch keys, and strangers opening chats to grow Redis.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { APPROVED_NOTICE } from '../../host/access/commands.js';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createTeamsPlugin } from '../../plugins/teams/channel.js';
import { referenceKey } from '../../plugins/teams/keys.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { signJwt, teamsSigningKey } from '../../testing/fakes/teams-auth.js';
import { type FakeTeams, startFakeTeams, TEAMS_TEST, type TeamsActivityOptions } from '../../testing/fakes/teams-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { BOT_SERVICE_ISSUER, botServiceToken, postActivity, teamsTestConfig } from './teams-harness.js';

const logger = createLogger({ level: 'silent' });
const ADMIN = { id: '29:1admin00000000000000000000000000000000000', name: 'Ada Admin' };
const MALLORY = { id: '29:1mallory000000000000000000000000000000000', name: 'Mallory' };
const ADMIN_CHAT = 'a:1admin-personal-chat';
const MALLORY_CHAT = 'a:1mallory-personal-chat';
const GROUP = '19:team-group-chat@thread.v2';
const CODE_RE = /pairing code is ([A-Z2-9]{4}-[A-Z2-9]{4})/;
const DAY = 86_400;

let teams: FakeTeams;
let redis: Redis;
let prefix: string;
let http: HttpServer;
let plugin: ChannelPlugin;
let url: string;
/** URLs the plugin fetched through `deps.fetch` (the bot's token, the signing keys). */
let fetched: string[];
let access: Record<string, unknown>;

beforeEach(async () => {
  teams = await startFakeTeams();
  redis = new Redis(redisUrl());
  prefix = testPrefix();
  fetched = [];
  access = { channels: { teams: { policy: 'pairing', groups: [GROUP], members: true } } };
  http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const countingFetch: typeof fetch = (input, init) => {
    fetched.push(String(input instanceof Request ? input.url : input));
    return fetch(input, init);
  };
  plugin = createTeamsPlugin(teamsTestConfig(teams), { logger, redis, prefix, fetch: countingFetch });
  const { host } = ingestOnlyHost({
    http,
    redis,
    prefix,
    logger,
    settings: () => ({ admins: [ADMIN.id] }),
    outbound: () => plugin.outbound,
    access: () => access,
  });
  await plugin.start(host);
  url = `${await listen(http, { host: '127.0.0.1', port: 0 })}/api/messages`;
});

afterEach(async () => {
  await plugin.stop();
  await http.close();
  await cleanupPrefix(redis, prefix);
  await redis.quit();
  await teams.close();
});

const message = (o: TeamsActivityOptions) => teams.message({ serviceUrl: teams.serviceUrl('amer'), ...o });
const reference = (chat: string) => redis.get(referenceKey(prefix, `teams:${chat}`));
const referenceTtl = (chat: string) => redis.ttl(referenceKey(prefix, `teams:${chat}`));
const conversationKeys = () => redis.keys(`${prefix}:*{c:*`);
/** Keys of conversation `chat` besides its reference: what the host recorded of it. */
const recorded = async (chat: string) => (await redis.keys(`${prefix}:{c:teams:${chat}}:*`)).filter((k) => k !== referenceKey(prefix, `teams:${chat}`));
/** What the bot sent, as `[region, conversation, text]`. */
const sent = () => teams.sent.filter((s) => s.type === 'message').map((s) => [s.region, s.conversationId, s.text]);

describe('teams inbound tokens', () => {
  it('refuses a token the tenant’s Entra (or the emulator’s) issued for the bot’s App ID, signed by a trusted key, naming the service URL: 401, nothing kept, nothing sent', async () => {
    // Any app registration of the tenant can get a client-credentials token for `<App ID>/.default`.
    const forged = message({ conversationId: ADMIN_CHAT, from: ADMIN, text: 'refund everyone' });
    const serviceUrl = String(forged.serviceUrl);
    for (const issuer of [
      `https://sts.windows.net/${TEAMS_TEST.tenantId}/`,
      `https://login.microsoftonline.com/${TEAMS_TEST.tenantId}/v2.0`,
      'https://sts.windows.net/d6d49420-f39b-4df7-a1dc-d59a935871db/',
    ]) {
      const res = await postActivity(teams, url, forged, teams.token({ issuer, serviceUrl }));
      expect(res.status, issuer).toBe(401);
    }
    expect(await reference(ADMIN_CHAT)).toBeNull();
    expect(await conversationKeys()).toEqual([]);
    expect(teams.calls).toEqual([]);
  });

  it('refuses a Bot Service token that names no service URL, or another one than the activity’s: 401, nothing kept', async () => {
    const noClaim = message({ conversationId: ADMIN_CHAT, from: ADMIN, text: 'hello' });
    expect((await postActivity(teams, url, noClaim, teams.token({ issuer: BOT_SERVICE_ISSUER }))).status).toBe(401);
    const moved = message({ conversationId: ADMIN_CHAT, from: ADMIN, text: 'hello', serviceUrl: teams.serviceUrl('emea') });
    expect((await postActivity(teams, url, moved, botServiceToken(teams, teams.serviceUrl('amer')))).status).toBe(401);
    expect(await reference(ADMIN_CHAT)).toBeNull();
    expect(await conversationKeys()).toEqual([]);
    expect(teams.calls).toEqual([]);
  });

  it('fetches the published keys once for a flood of tokens naming made-up key ids', async () => {
    expect((await postActivity(teams, url, message({ conversationId: ADMIN_CHAT, from: ADMIN, text: 'hi' }))).status).toBe(200);
    const keysUrl = String(teamsTestConfig(teams).botFrameworkKeysUrl);
    expect(fetched.filter((u) => u === keysUrl)).toHaveLength(1);
    const now = Math.floor(Date.now() / 1000);
    const unpublished = teamsSigningKey('unpublished');
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => {
        const activity = message({ conversationId: ADMIN_CHAT, from: ADMIN, text: `guess ${i}` });
        const claims = { iss: BOT_SERVICE_ISSUER, aud: TEAMS_TEST.appId, nbf: now, exp: now + 600, serviceurl: activity.serviceUrl };
        return postActivity(teams, url, activity, signJwt(claims, { ...unpublished, kid: `made-up-${i}` })).then((r) => r.status);
      }),
    );
    expect(statuses).toEqual(Array(20).fill(401));
    expect(fetched.filter((u) => u === keysUrl)).toHaveLength(1);
  });
});

describe('teams service URLs', () => {
  it('refuses a service URL on Azure Storage even when a Bot Service token names it: the conversation’s replies still go to Teams', async () => {
    expect((await postActivity(teams, url, message({ conversationId: ADMIN_CHAT, from: ADMIN, text: 'hi' }))).status).toBe(200);
    const stolen = message({ conversationId: ADMIN_CHAT, from: MALLORY, text: 'reply to me', serviceUrl: 'https://attacker.blob.core.windows.net/teams/' });
    expect((await postActivity(teams, url, stolen)).status).toBe(401);
    expect(await reference(ADMIN_CHAT)).toBe(teams.serviceUrl('amer'));
    await plugin.outbound.send(`teams:${ADMIN_CHAT}`, 'Your report is ready.');
    expect(sent()).toEqual([['amer', ADMIN_CHAT, 'Your report is ready.']]);
  });
});

describe('teams channels of the same Azure Bot', () => {
  it('ignores a Web Chat or Direct Line activity that names an admin as its sender: 200, nothing kept, nothing reaches the host', async () => {
    for (const channelId of ['webchat', 'directline']) {
      const activity = { ...message({ conversationId: `${channelId}-conversation`, from: ADMIN, text: 'approve everything' }), channelId };
      const res = await postActivity(teams, url, activity);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ok: true, ignored: 'not-teams' });
      expect(await reference(`${channelId}-conversation`)).toBeNull();
    }
    expect(await conversationKeys()).toEqual([]);
    expect(teams.calls).toEqual([]);
  });
});

describe('teams conversation references', () => {
  it('keeps a refused stranger’s reference an hour: the pairing code and an approval reach their region; once a message is taken in, 90 days', async () => {
    const first = await postActivity(teams, url, message({ conversationId: MALLORY_CHAT, from: MALLORY, text: 'let me in' }));
    expect(first.body).toEqual({ ok: true, result: 'ignored' });
    const [notice] = sent();
    expect(notice?.slice(0, 2)).toEqual(['amer', MALLORY_CHAT]);
    const code = CODE_RE.exec(String(notice?.[2]))?.[1];
    expect(code).toBeDefined();
    expect(await referenceTtl(MALLORY_CHAT)).toBeGreaterThan(0);
    expect(await referenceTtl(MALLORY_CHAT)).toBeLessThanOrEqual(3600);

    const pair = message({ conversationId: ADMIN_CHAT, from: ADMIN, text: `/pair ${code}`, serviceUrl: teams.serviceUrl('emea') });
    expect((await postActivity(teams, url, pair)).status).toBe(200);
    expect(sent()).toContainEqual(['amer', MALLORY_CHAT, APPROVED_NOTICE]);

    const next = await postActivity(teams, url, message({ conversationId: MALLORY_CHAT, from: MALLORY, text: 'hello again' }));
    expect(next.body).toEqual({ ok: true, result: 'new-run' });
    expect(await referenceTtl(MALLORY_CHAT)).toBeGreaterThan(89 * DAY);
  });

  it('leaves a stranger who opens many chats only hour-long references, none for other activities, and does not shorten a taken-in conversation’s', async () => {
    expect((await postActivity(teams, url, message({ conversationId: GROUP, conversationType: 'groupChat', from: ADMIN, text: 'hi all' }))).status).toBe(200);
    expect(await referenceTtl(GROUP)).toBeGreaterThan(89 * DAY);

    const refused = await postActivity(teams, url, message({ conversationId: GROUP, conversationType: 'groupChat', from: MALLORY, text: 'me too' }));
    expect(refused.body).toEqual({ ok: true, result: 'ignored' });
    expect(await referenceTtl(GROUP)).toBeGreaterThan(89 * DAY);

    const chats = Array.from({ length: 8 }, (_, i) => `19:mallory-chat-${i}@thread.v2`);
    for (const chat of chats) {
      const res = await postActivity(teams, url, message({ conversationId: chat, conversationType: 'groupChat', from: MALLORY, text: 'hello?' }));
      expect(res.body).toEqual({ ok: true, result: 'ignored' });
      const added = await postActivity(teams, url, message({ conversationId: `${chat}-added`, from: MALLORY, type: 'conversationUpdate' }));
      expect(added.body).toEqual({ ok: true, ignored: 'not-a-message' });
    }
    for (const chat of chats) {
      const ttl = await referenceTtl(chat);
      expect(ttl, chat).toBeGreaterThan(0);
      expect(ttl, chat).toBeLessThanOrEqual(3600);
      expect(await reference(`${chat}-added`)).toBeNull();
      expect(await recorded(chat)).toEqual([]);
    }
  });
});
